//! Who a memory belongs to. Every turn, segment and card carries a scope, and every read names one:
//! nothing crosses from one user to another.

use serde::{Deserialize, Serialize};

use crate::InvalidInput;

/// The owner of a memory: a user, optionally narrowed to one agent and one run (Mem0's scoping).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Scope {
    pub user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

impl Scope {
    /// A scope for a user alone.
    pub fn user(user_id: impl Into<String>) -> Result<Self, InvalidInput> {
        Self::new(user_id.into(), None, None)
    }

    /// A validated scope: ids must be non-empty, at most 256 bytes, without control characters.
    pub fn new(
        user_id: String,
        agent_id: Option<String>,
        run_id: Option<String>,
    ) -> Result<Self, InvalidInput> {
        check_id("user_id", &user_id)?;
        if let Some(a) = &agent_id {
            check_id("agent_id", a)?;
        }
        if let Some(r) = &run_id {
            check_id("run_id", r)?;
        }
        Ok(Self {
            user_id,
            agent_id,
            run_id,
        })
    }

    /// A canonical one-string form, used as a key by stores and indexes.
    pub fn key(&self) -> String {
        format!(
            "{}\u{1f}{}\u{1f}{}",
            self.user_id,
            self.agent_id.as_deref().unwrap_or(""),
            self.run_id.as_deref().unwrap_or("")
        )
    }

    /// The filter that selects exactly this scope.
    pub fn as_filter(&self) -> ScopeFilter {
        ScopeFilter {
            user_id: self.user_id.clone(),
            agent_id: self.agent_id.clone(),
            run_id: self.run_id.clone(),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "user {}", self.user_id)?;
        if let Some(a) = &self.agent_id {
            write!(f, ", agent {a}")?;
        }
        if let Some(r) = &self.run_id {
            write!(f, ", run {r}")?;
        }
        Ok(())
    }
}

/// What a read may see: always one user; optionally only one agent and/or one run of that user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScopeFilter {
    pub user_id: String,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub run_id: Option<String>,
}

impl ScopeFilter {
    pub fn user(user_id: impl Into<String>) -> Self {
        Self {
            user_id: user_id.into(),
            agent_id: None,
            run_id: None,
        }
    }

    /// True when the filter keeps only one agent or one run of its user.
    pub fn narrowed(&self) -> bool {
        self.agent_id.is_some() || self.run_id.is_some()
    }

    /// True when `scope` lies inside this filter.
    pub fn admits(&self, scope: &Scope) -> bool {
        scope.user_id == self.user_id
            && self
                .agent_id
                .as_ref()
                .is_none_or(|a| scope.agent_id.as_ref() == Some(a))
            && self
                .run_id
                .as_ref()
                .is_none_or(|r| scope.run_id.as_ref() == Some(r))
    }
}

fn check_id(what: &str, id: &str) -> Result<(), InvalidInput> {
    if id.trim().is_empty() {
        return Err(InvalidInput(format!("{what} must not be empty")));
    }
    if id.len() > 256 {
        return Err(InvalidInput(format!(
            "{what} is {} bytes long; at most 256 are allowed",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(InvalidInput(format!(
            "{what} {id:?} contains a control character"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_or_control_ids_are_rejected() {
        assert!(Scope::user("").is_err());
        assert!(Scope::user("  ").is_err());
        assert!(Scope::user("a\u{1f}b").is_err());
        assert!(Scope::new("u".into(), Some(String::new()), None).is_err());
    }

    #[test]
    fn filter_narrows_by_agent_and_run() {
        let s = Scope::new("u".into(), Some("a".into()), Some("r".into())).unwrap();
        assert!(ScopeFilter::user("u").admits(&s));
        assert!(!ScopeFilter::user("v").admits(&s));
        let mut f = ScopeFilter::user("u");
        f.agent_id = Some("b".into());
        assert!(!f.admits(&s));
        f.agent_id = Some("a".into());
        f.run_id = Some("r".into());
        assert!(f.admits(&s));
    }

    #[test]
    fn keys_distinguish_absent_parts() {
        let a = Scope::new("u".into(), Some("x".into()), None).unwrap();
        let b = Scope::new("u".into(), None, Some("x".into())).unwrap();
        assert_ne!(a.key(), b.key());
    }
}
