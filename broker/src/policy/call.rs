//! The policy as one call sees it: the snapshot taken at the call's start
//! plus the session scope the harness stamped on it.
//!
//! Security meaning: every caller path of a call goes through
//! [`CallPolicy::resolve`], so a scoped call cannot reach a path by a route
//! that forgets the scope.
#![forbid(unsafe_code)]

use super::jail::PathKind;
use super::session::SessionScope;
use super::Policy;
use crate::error::ShellError;
use ide_proto::RootedPath;
use std::ops::Deref;
use std::sync::Arc;

/// One call's policy snapshot and validated session scope.
#[derive(Debug, Clone)]
pub struct CallPolicy {
    policy: Arc<Policy>,
    scope: Option<SessionScope>,
}

impl CallPolicy {
    /// Binds a validated scope (if any) to the call's snapshot.
    pub fn new(policy: Arc<Policy>, scope: Option<SessionScope>) -> Self {
        Self { policy, scope }
    }

    /// The call's session scope.
    pub fn scope(&self) -> Option<&SessionScope> {
        self.scope.as_ref()
    }

    /// Resolves a caller's path through the jail and the session scope.
    pub fn resolve(&self, raw: &str, kind: PathKind) -> Result<RootedPath, ShellError> {
        self.policy
            .jail()
            .resolve_in(raw, self.scope.as_ref(), kind)
    }
}

impl Deref for CallPolicy {
    type Target = Policy;

    fn deref(&self) -> &Policy {
        &self.policy
    }
}
