//! Trigger bindings: the engine's own `configuration` type, types provided
//! by workers, and triggers parked until their type appears.
//!
//! Security meaning: a bad `configuration` trigger config is refused with a
//! `triggerregistrationresult` error (the only reply a trigger ever gets), and
//! a worker's triggers vanish with its connection, so a test cannot rely on
//! a subscription the real engine would have dropped.

#![forbid(unsafe_code)]

use std::collections::HashMap;

use iii_sdk::protocol::ErrorBody;
use iii_sdk::Message;
use serde::Deserialize;
use serde_json::Value;

use super::configuration::EVENT_TYPES;
use super::state::{ConnId, State};

/// The trigger type the engine itself provides.
pub(crate) const CONFIGURATION: &str = "configuration";

/// The `config` of a `configuration` trigger.
#[derive(Debug, Default, Deserialize, PartialEq)]
pub(crate) struct ConfigFilter {
    #[serde(default)]
    configuration_id: Option<String>,
    #[serde(default)]
    event_types: Option<Vec<String>>,
    #[serde(default)]
    condition_function_id: Option<String>,
}

impl ConfigFilter {
    /// Parses and checks a trigger config (`null` subscribes to everything).
    pub fn parse(config: &Value) -> Result<ConfigFilter, String> {
        if config.is_null() {
            return Ok(ConfigFilter::default());
        }
        let filter = ConfigFilter::deserialize(config)
            .map_err(|e| format!("invalid configuration trigger config: {e}"))?;
        if let Some(bad) = filter
            .event_types
            .iter()
            .flatten()
            .find(|t| !EVENT_TYPES.contains(&t.as_str()))
        {
            return Err(format!(
                "invalid configuration trigger config: unknown event type '{bad}'"
            ));
        }
        Ok(filter)
    }

    fn matches(&self, event_type: &str, id: &str) -> bool {
        self.configuration_id.as_deref().is_none_or(|c| c == id)
            && self
                .event_types
                .as_ref()
                .is_none_or(|types| types.iter().any(|t| t == event_type))
    }
}

struct Trigger {
    conn: ConnId,
    trigger_type: String,
    function_id: String,
    metadata: Option<Value>,
    config: Option<ConfigFilter>,
    /// The `registertrigger` frame, forwarded to a provider as is.
    frame: Message,
}

/// One delivery of a configuration event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Subscriber {
    pub function_id: String,
    pub metadata: Option<Value>,
    pub condition_function_id: Option<String>,
}

/// Every trigger and trigger-type provider.
#[derive(Default)]
pub(crate) struct Triggers {
    by_id: HashMap<String, Trigger>,
    providers: HashMap<String, ConnId>,
}

/// A `registertrigger` as received.
#[derive(Clone)]
pub(crate) struct Registration {
    pub id: String,
    pub trigger_type: String,
    pub function_id: String,
    pub config: Value,
    pub metadata: Option<Value>,
    pub namespace: Option<String>,
    pub trigger_namespace: Option<String>,
}

impl Registration {
    /// The frame a provider receives.
    fn frame(self) -> Message {
        Message::RegisterTrigger {
            id: self.id,
            trigger_type: self.trigger_type,
            function_id: self.function_id,
            config: self.config,
            metadata: self.metadata,
            namespace: self.namespace,
            trigger_namespace: self.trigger_namespace,
        }
    }
}

fn rejection(id: &str, trigger_type: &str, function_id: &str, message: String) -> Message {
    Message::TriggerRegistrationResult {
        id: id.to_string(),
        trigger_type: trigger_type.to_string(),
        function_id: function_id.to_string(),
        error: Some(ErrorBody::new("trigger_registration_failed", message)),
    }
}

/// Binds a trigger for `from`; replies only on error, forwards to a provider.
pub(crate) fn register(st: &mut State, from: ConnId, reg: Registration) {
    let config = if reg.trigger_type == CONFIGURATION {
        match ConfigFilter::parse(&reg.config) {
            Ok(filter) => Some(filter),
            Err(message) => {
                let reply = rejection(&reg.id, &reg.trigger_type, &reg.function_id, message);
                st.send(from, &reply);
                return;
            }
        }
    } else {
        None
    };
    let frame = reg.clone().frame();
    if let Some(provider) = st.triggers.providers.get(&reg.trigger_type) {
        st.send(*provider, &frame);
    }
    st.triggers.by_id.insert(
        reg.id,
        Trigger {
            conn: from,
            trigger_type: reg.trigger_type,
            function_id: reg.function_id,
            metadata: reg.metadata,
            config,
            frame,
        },
    );
}

/// Removes `from`'s trigger `id` and tells its provider.
pub(crate) fn unregister(st: &mut State, from: ConnId, id: &str) {
    if st.triggers.by_id.get(id).is_some_and(|t| t.conn == from) {
        if let Some(t) = st.triggers.by_id.remove(id) {
            tell_provider_gone(st, &t, id);
        }
    }
}

fn tell_provider_gone(st: &State, t: &Trigger, id: &str) {
    if let Some(provider) = st.triggers.providers.get(&t.trigger_type) {
        st.send(
            *provider,
            &Message::UnregisterTrigger {
                id: id.to_string(),
                trigger_type: t.trigger_type.clone(),
            },
        );
    }
}

/// `from` provides `trigger_type`: the triggers parked for it go there.
pub(crate) fn register_type(st: &mut State, from: ConnId, trigger_type: &str) {
    if trigger_type == CONFIGURATION {
        return;
    }
    st.triggers.providers.insert(trigger_type.to_string(), from);
    for t in st.triggers.by_id.values() {
        if t.trigger_type == trigger_type {
            st.send(from, &t.frame);
        }
    }
}

/// `from` stops providing `trigger_type`; its triggers are parked again.
pub(crate) fn unregister_type(st: &mut State, from: ConnId, trigger_type: &str) {
    if st.triggers.providers.get(trigger_type) == Some(&from) {
        st.triggers.providers.remove(trigger_type);
    }
}

/// A provider refused a trigger: the trigger's owner hears of it.
pub(crate) fn provider_result(st: &State, from: ConnId, id: &str, reply: &Message) {
    if let Some(t) = st.triggers.by_id.get(id) {
        if st.triggers.providers.get(&t.trigger_type) == Some(&from) {
            st.send(t.conn, reply);
        }
    }
}

/// Drops everything `conn` registered or provided.
pub(crate) fn connection_gone(st: &mut State, conn: ConnId) {
    st.triggers.providers.retain(|_, p| *p != conn);
    let ids: Vec<String> = st
        .triggers
        .by_id
        .iter()
        .filter(|(_, t)| t.conn == conn)
        .map(|(id, _)| id.clone())
        .collect();
    for id in ids {
        if let Some(t) = st.triggers.by_id.remove(&id) {
            tell_provider_gone(st, &t, &id);
        }
    }
}

/// The `configuration` subscribers of one event, in a stable order.
pub(crate) fn config_subscribers(st: &State, event_type: &str, id: &str) -> Vec<Subscriber> {
    let mut matched: Vec<(&String, &Trigger)> = st
        .triggers
        .by_id
        .iter()
        .filter(|(_, t)| t.config.as_ref().is_some_and(|c| c.matches(event_type, id)))
        .collect();
    matched.sort_by_key(|(trigger_id, _)| *trigger_id);
    matched
        .into_iter()
        .map(|(_, t)| Subscriber {
            function_id: t.function_id.clone(),
            metadata: t.metadata.clone(),
            condition_function_id: t
                .config
                .as_ref()
                .and_then(|c| c.condition_function_id.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::sync::mpsc;
    use tokio_tungstenite::tungstenite::Message as WsMessage;

    fn reg(id: &str, trigger_type: &str, config: Value) -> Registration {
        Registration {
            id: id.into(),
            trigger_type: trigger_type.into(),
            function_id: format!("f::{id}"),
            config,
            metadata: Some(json!({"m": id})),
            namespace: None,
            trigger_namespace: None,
        }
    }

    fn frames(rx: &mut mpsc::UnboundedReceiver<WsMessage>) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(WsMessage::Text(t)) = rx.try_recv() {
            out.push(serde_json::from_str(t.as_str()).unwrap());
        }
        out
    }

    #[test]
    fn config_filters_parse_and_reject_unknown_event_types() {
        assert_eq!(
            ConfigFilter::parse(&Value::Null),
            Ok(ConfigFilter::default())
        );
        assert!(ConfigFilter::parse(&json!({"event_types": ["configuration:exploded"]})).is_err());
        assert!(ConfigFilter::parse(&json!({"configuration_id": 5})).is_err());
        assert!(ConfigFilter::parse(&json!("ide")).is_err());
        let f = ConfigFilter::parse(
            &json!({"configuration_id": "ide", "event_types": ["configuration:updated"]}),
        )
        .unwrap();
        assert!(f.matches("configuration:updated", "ide"));
        assert!(!f.matches("configuration:registered", "ide"));
        assert!(!f.matches("configuration:updated", "other"));
    }

    #[test]
    fn a_bad_config_trigger_is_refused_and_not_stored() {
        let mut st = State::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (conn, _) = st.connect(tx);
        register(
            &mut st,
            conn,
            reg("t1", CONFIGURATION, json!({"event_types": ["nope"]})),
        );
        let sent = frames(&mut rx);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0]["type"], "triggerregistrationresult");
        assert_eq!(sent[0]["error"]["code"], "trigger_registration_failed");
        assert!(config_subscribers(&st, "configuration:updated", "ide").is_empty());
    }

    #[test]
    fn subscribers_match_by_id_and_type_and_die_with_their_connection() {
        let mut st = State::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (conn, _) = st.connect(tx);
        register(
            &mut st,
            conn,
            reg("a", CONFIGURATION, json!({"configuration_id": "ide"})),
        );
        register(
            &mut st,
            conn,
            reg("b", CONFIGURATION, json!({"configuration_id": "other"})),
        );
        register(&mut st, conn, reg("c", CONFIGURATION, Value::Null));
        assert!(frames(&mut rx).is_empty(), "no reply on success");
        let subs = config_subscribers(&st, "configuration:updated", "ide");
        let ids: Vec<&str> = subs.iter().map(|s| s.function_id.as_str()).collect();
        assert_eq!(ids, ["f::a", "f::c"]);
        assert_eq!(subs[0].metadata, Some(json!({"m": "a"})));
        unregister(&mut st, conn + 1, "a");
        assert_eq!(
            config_subscribers(&st, "configuration:updated", "ide").len(),
            2
        );
        unregister(&mut st, conn, "a");
        assert_eq!(
            config_subscribers(&st, "configuration:updated", "ide").len(),
            1
        );
        connection_gone(&mut st, conn);
        assert!(config_subscribers(&st, "configuration:updated", "ide").is_empty());
    }

    #[test]
    fn parked_triggers_go_to_a_provider_when_it_appears() {
        let mut st = State::default();
        let (tx_a, mut rx_a) = mpsc::unbounded_channel();
        let (owner, _) = st.connect(tx_a);
        let (tx_p, mut rx_p) = mpsc::unbounded_channel();
        let (provider, _) = st.connect(tx_p);
        register(&mut st, owner, reg("p1", "cron", json!({"every": "1s"})));
        assert!(frames(&mut rx_p).is_empty(), "parked");
        register_type(&mut st, provider, "cron");
        let sent = frames(&mut rx_p);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0]["type"], "registertrigger");
        assert_eq!(sent[0]["id"], "p1");
        let refused = rejection("p1", "cron", "f::p1", "bad".into());
        provider_result(&st, provider, "p1", &refused);
        assert_eq!(frames(&mut rx_a)[0]["error"]["message"], "bad");
        connection_gone(&mut st, owner);
        assert_eq!(frames(&mut rx_p)[0]["type"], "unregistertrigger");
    }
}
