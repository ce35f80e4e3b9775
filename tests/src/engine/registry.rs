//! Function registration and the cleanup of a vanished connection.
//!
//! Security meaning: one live connection owns a function id; another
//! connection registering it is refused with `FUNCTION_NAMESPACE_CONFLICT`
//! (it never steals the route), and everything a connection registered or
//! had in flight is withdrawn the moment it disconnects.

#![forbid(unsafe_code)]

use iii_sdk::protocol::{ObserveDescriptor, FUNCTION_NAMESPACE_CONFLICT};
use iii_sdk::Message;
use serde_json::Value;

use super::observe;
use super::state::{ConnId, Function, State};
use super::triggers;

/// Handles `registerfunction` from worker `from`; `frame` is the raw frame.
pub(crate) fn register(
    st: &mut State,
    from: ConnId,
    id: String,
    frame: Value,
    descriptor: Option<Box<ObserveDescriptor>>,
) {
    if let Some(existing) = st.functions.get(&id) {
        if existing.conn != from {
            let owner_worker_id = st.worker_id(existing.conn);
            st.send(
                from,
                &Message::RegistrationRejected {
                    code: FUNCTION_NAMESPACE_CONFLICT.to_string(),
                    namespace: "default".to_string(),
                    worker_name: None,
                    function_id: Some(id),
                    owner_worker_id,
                },
            );
            return;
        }
    }
    st.functions.insert(
        id.clone(),
        Function {
            conn: from,
            frame,
            observe: descriptor.map(|d| *d).unwrap_or_default(),
            revision: 1,
        },
    );
    let observers = observe::function_registered(st, &id);
    st.send(
        from,
        &Message::FunctionRegistered {
            id,
            namespace: "default".to_string(),
            revision: 1,
            local_dispatch: false,
            observers,
        },
    );
}

/// Handles `unregisterfunction` from worker `from`.
pub(crate) fn unregister(st: &mut State, from: ConnId, id: &str) {
    if st.owner(id) == Some(from) {
        st.functions.remove(id);
        observe::function_gone(st, id);
    }
}

/// Withdraws everything `conn` registered, observed or had in flight.
pub(crate) fn connection_gone(st: &mut State, conn: ConnId) {
    st.conns.remove(&conn);
    let owned: Vec<String> = st
        .functions
        .iter()
        .filter(|(_, f)| f.conn == conn)
        .map(|(id, _)| id.clone())
        .collect();
    for id in &owned {
        st.functions.remove(id);
        observe::function_gone(st, id);
    }
    observe::connection_gone(st, conn);
    triggers::connection_gone(st, conn);
    st.stop_invocations(conn);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::Pending;
    use serde_json::json;
    use tokio::sync::mpsc;
    use tokio_tungstenite::tungstenite::Message as WsMessage;
    use uuid::Uuid;

    fn frames(rx: &mut mpsc::UnboundedReceiver<WsMessage>) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(WsMessage::Text(t)) = rx.try_recv() {
            out.push(serde_json::from_str(t.as_str()).unwrap());
        }
        out
    }

    #[test]
    fn registration_is_acknowledged_and_a_second_owner_is_refused() {
        let mut st = State::default();
        let (tx_a, mut rx_a) = mpsc::unbounded_channel();
        let (a, worker_a) = st.connect(tx_a);
        let (tx_b, mut rx_b) = mpsc::unbounded_channel();
        let (b, _) = st.connect(tx_b);
        register(&mut st, a, "f".into(), json!({"id": "f"}), None);
        let ack = frames(&mut rx_a);
        assert_eq!(ack[0]["type"], "functionregistered");
        assert_eq!(ack[0]["revision"], 1);
        assert_eq!(ack[0]["local_dispatch"], false);
        register(&mut st, b, "f".into(), json!({"id": "f"}), None);
        let refused = frames(&mut rx_b);
        assert_eq!(refused[0]["type"], "registrationrejected");
        assert_eq!(refused[0]["code"], "FUNCTION_NAMESPACE_CONFLICT");
        assert_eq!(refused[0]["owner_worker_id"], json!(worker_a));
        assert_eq!(st.owner("f"), Some(a));
        unregister(&mut st, b, "f");
        assert_eq!(st.owner("f"), Some(a), "only the owner unregisters");
        unregister(&mut st, a, "f");
        assert_eq!(st.owner("f"), None);
    }

    #[test]
    fn a_vanished_target_stops_its_calls_and_drops_its_functions() {
        let mut st = State::default();
        let (tx_c, mut rx_c) = mpsc::unbounded_channel();
        let (caller, _) = st.connect(tx_c);
        let (tx_t, _rx_t) = mpsc::unbounded_channel();
        let (target, _) = st.connect(tx_t);
        register(&mut st, target, "f".into(), json!({}), None);
        let in_flight = Uuid::new_v4();
        st.pending.insert(
            in_flight,
            Pending::Relay {
                caller,
                target,
                function_id: "f".into(),
                observed: None,
            },
        );
        connection_gone(&mut st, target);
        assert_eq!(st.owner("f"), None);
        assert!(st.pending.is_empty());
        let stopped = frames(&mut rx_c);
        assert_eq!(stopped[0]["type"], "invocationresult");
        assert_eq!(stopped[0]["invocation_id"], json!(in_flight.to_string()));
        assert_eq!(stopped[0]["error"]["code"], "invocation_stopped");
    }
}
