//! Privilege separation on the broker's side: who the broker runs as, and
//! what it keeps.
//!
//! Security meaning: the broker faces the network and may be compromised,
//! so it holds as little as possible. It is the only holder of the engine
//! token, which never sits in its environment ([`token`]). Started as root
//! with its own executor, it drops to an unprivileged user once the executor
//! (which keeps root) is running, loses every capability, and can no longer
//! execute programs or inspect other processes ([`drop`], [`filter`]),
//! verified thread by thread ([`verify`]).
#![forbid(unsafe_code)]

pub mod drop;
pub mod filter;
pub mod token;
pub mod verify;

pub use drop::{drop_to, resolve, BrokerUser};

/// The account a root broker drops to unless `--broker-user` says otherwise.
pub const DEFAULT_BROKER_USER: &str = "nobody";

/// The user this broker will drop to: only when it runs as root and starts
/// its own executor (with `--executor-socket` the executor is a separate
/// service and the broker's account is the service manager's choice).
pub fn planned_drop(
    running_as_root: bool,
    spawns_executor: bool,
    broker_user: &str,
) -> Result<Option<BrokerUser>, String> {
    if running_as_root && spawns_executor && !keeps_root(broker_user) {
        resolve(broker_user).map(Some)
    } else {
        Ok(None)
    }
}

/// `--broker-user root` (or `0`) keeps the broker root: then it can start a
/// new executor itself when one dies, at the price of an engine-facing
/// process with every privilege. Only for hosts where that trade is wanted.
fn keeps_root(broker_user: &str) -> bool {
    matches!(broker_user.trim(), "root" | "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_as_the_broker_user_means_no_drop() {
        assert_eq!(planned_drop(true, true, "root"), Ok(None));
        assert_eq!(planned_drop(true, true, "0"), Ok(None));
    }

    #[test]
    fn only_a_root_broker_that_spawns_its_executor_drops() {
        assert!(planned_drop(true, true, "nobody").unwrap().is_some());
        assert_eq!(planned_drop(false, true, "nobody"), Ok(None));
        assert_eq!(planned_drop(true, false, "nobody"), Ok(None));
        assert!(planned_drop(true, true, "ide-no-such-user").is_err());
        assert_eq!(planned_drop(false, true, "ide-no-such-user"), Ok(None));
    }
}
