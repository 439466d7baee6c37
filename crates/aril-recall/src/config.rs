//! How the LLM-free recall ranks and fuses: every weight and depth of [`crate::Recall`], with
//! its measured default.

use serde::{Deserialize, Serialize};

/// How recall ranks and fuses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallConfig {
    /// Candidates taken from each ranked list before fusion.
    pub candidates: usize,
    /// The `k` of reciprocal-rank fusion.
    pub rrf_k: f32,
    /// Fusion weight of dense (cosine) search over turns.
    pub w_dense_turns: f32,
    /// Fusion weight of BM25 over turns.
    pub w_lexical_turns: f32,
    /// Which turns the BM25 turn lists rank: `dense_roles` (default) the turns of `dense_roles`
    /// only, the turns the dense turn lists rank, so both turn lists vote among the same turns;
    /// `all` every turn. Either way every turn stays in its window's BM25 list and its segment, and
    /// BM25's statistics count every turn. Measured (docs/benchmarks-history.md): on LongMemEval,
    /// whose assistant replies are long and share a request's words ("suggest", "current"), keeping
    /// them out lifts the dev file widened five times (scripts/widen-longmemeval) from rankfor R@5
    /// / R@10 91.9 / 96.7 to 93.8 / 97.5; LoCoMo and HotpotQA, whose turns are all the user's, rank
    /// exactly as before.
    pub lexical_turn_roles: LexicalTurnRoles,
    /// Fusion weight of dense search over segments.
    pub w_dense_segments: f32,
    /// Fusion weight of BM25 over segments (0 by default: the window list does its work
    /// better; a list of weight 0 is not searched).
    pub w_lexical_segments: f32,
    /// Fusion weight of BM25 over the turns' lexical windows (`aril_core::window_text`: a turn with
    /// its session neighbours, searched for the turn). Measured on LoCoMo
    /// (docs/benchmarks-history.md), it finds short replies by the words of the exchange around
    /// them.
    pub w_lexical_windows: f32,
    /// Fusion weight of each of the three speaker-focus lists (the dense, BM25 and window turn
    /// lists searched again for the question without the name, restricted to the turns of the
    /// one speaker a question names; [`crate::focus`]). 0 turns speaker focus off.
    pub w_focus: f32,
    /// Fusion weight of each of the three date-focus lists (the dense, BM25 and window turn
    /// lists searched again for the question without the date, restricted to the turns said in
    /// the one day, month or year a question names; [`crate::dated`]). 0 turns date focus off.
    pub w_dated: f32,
    /// Fusion weight of the newest-first list a question about the present adds ("now",
    /// "currently", "still", "so far", ...; [`crate::present`]): the fused candidates ranked by
    /// when they were said, so the latest of statements of about equal relevance comes first.
    /// 0 turns it off.
    pub w_present: f32,
    /// Whether a question in the present tense (its first auxiliary "do", "is", "have", ...)
    /// asks about the present too, without a cue. Measured (docs/benchmarks-history.md): on
    /// LongMemEval's knowledge updates the newest answer session comes first far more often, but
    /// questions that gather every statement ("How many ... have I ...?") lose some recall at 5,
    /// and LoCoMo some at 1k tokens; off by default.
    pub present_tense: bool,
    /// How much deeper than `candidates` a focus list is searched first (it keeps the named
    /// speaker's or period's turns), so it still holds about `candidates` turns.
    pub focus_depth: usize,
    /// Fusion weight of the session list in [`crate::Recall::search_sessions`] (sessions ranked by
    /// the mean cosine of their best `session_turns` dense turns); 0 ranks sessions by their best
    /// unit alone. Turn search ([`crate::Recall::search`]) does not use it. Measured on LongMemEval
    /// (docs/benchmarks-history.md): it lifts sessions that speak of the question in several turns.
    /// A question about the assistant's own replies gets none ([`crate::replies`]).
    pub w_sessions: f32,
    /// How many of a session's best dense turns its session-list score averages.
    pub session_turns: usize,
    /// How deep the session list reads the dense turn list: a session is listed when at least
    /// two of its turns are among the question's `session_depth` nearest. Read deeper, a long
    /// session gets two turns in by chance and its best turns' mean, the maximum of many noisy
    /// cosines, outranks a short session that speaks of the question (docs/benchmarks-history.md).
    pub session_depth: usize,
    /// Results returned when the caller gives no `k`.
    pub default_k: usize,
    /// Up to this many memories meeting a search's filter, the search ranks them all by their own
    /// vectors (exact over the admitted turns, one round); above it, it searches the scope and
    /// reads deeper until `k` meet the filter (`filtered_depth_max`).
    pub prefilter_max: usize,
    /// How deep a filtered search above `prefilter_max` reads each list at most: from
    /// `candidates`, four times deeper a round while fewer than `k` results meet the filter.
    /// Lists read this deep that still hold fewer: the admitted memories are ranked all, exactly.
    pub filtered_depth_max: usize,
    /// How retrieved segments take part: `rank_turns` (default) credits each member turn with the
    /// segment's rank, so a segment's context lifts its turns but only turns are shown; `units`
    /// returns segments as units of their own. Measured on LoCoMo, showing whole segments spends
    /// the token budget on neighbours of the evidence (docs/benchmarks-history.md).
    pub segments: SegmentUse,
    /// Weight of each counting focus list ([`crate::counting`]): a question that counts or sums
    /// ("how many …", "… in total") is searched again without its counting words (dense, BM25,
    /// windows), fused beside its own lists. 0 turns it off. Measured on LongMemEval dev and dev2
    /// (docs/benchmarks-history.md): the counting words draw turns that count something else.
    pub w_counting: f32,
    /// Weight of the age focus ([`crate::age`]): a question about the asker's own age ("How old
    /// was I when …") gets one list of the user's turns that state an age ("I just turned
    /// 32"), found by three searches, fused beside its own lists. 0 turns it off. Measured on
    /// LongMemEval dev and dev2 (docs/benchmarks-history.md): the age is said in passing in
    /// another session, in no word of the question. 6 is the three lists' 2 each from before
    /// they were one.
    pub w_age: f32,
}

/// The `k` of RRF in the LLM-free recall: lower than the customary 60, because a retrieved segment
/// credits all its turns with one rank and a large `k` lets such ties outweigh the turn lists'
/// leaders. Measured (docs/benchmarks-history.md): LoCoMo evidence recall at 1k tokens 0.794 at 60,
/// 0.812 at 20, 0.825 at 10; LongMemEval dev within a question either way.
pub const RECALL_RRF_K: f32 = 20.0;

/// See [`RecallConfig::segments`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentUse {
    RankTurns,
    Units,
}

/// See [`RecallConfig::lexical_turn_roles`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LexicalTurnRoles {
    DenseRoles,
    All,
}

impl Default for RecallConfig {
    fn default() -> Self {
        Self {
            candidates: 50,
            rrf_k: RECALL_RRF_K,
            w_dense_turns: 1.0,
            w_lexical_turns: 1.0,
            lexical_turn_roles: LexicalTurnRoles::DenseRoles,
            w_dense_segments: 1.0,
            w_lexical_segments: 0.0,
            w_lexical_windows: 2.0,
            w_focus: 2.0,
            w_dated: 2.0,
            w_present: 2.0,
            present_tense: false,
            focus_depth: 4,
            w_sessions: 2.0,
            session_turns: 3,
            session_depth: 25,
            default_k: 10,
            prefilter_max: 4096,
            filtered_depth_max: 4096,
            segments: SegmentUse::RankTurns,
            w_counting: 1.0,
            w_age: 6.0,
        }
    }
}
