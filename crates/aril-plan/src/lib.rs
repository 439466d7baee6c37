//! The read path's planning step (seed 000, BRIEF §1.4): one call turns a question into up to a
//! few retrieval paths. Each path has a goal, a search text, optional entities and topics for the
//! structured indexes, an absolute time window (relative phrases resolved against the date the
//! question is asked) and the unit kinds it wants (cards, verbatim turns). No other generative call
//! happens before the answer.
//!
//! Without a planner model, [`Plan::single`] is the plan: one path, the question itself, both
//! unit kinds, no window.

mod plan;
mod schema;

pub use plan::{Plan, PlanConfig, PlanPath, Planned, TimeWindow, Want, plan_question};
