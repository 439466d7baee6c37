//! The open segment of one conversation and the boundary decision for each new turn.

use aril_core::{CloseReason, TurnId};
use aril_embed::dot;
use serde::{Deserialize, Serialize};

use crate::SegmenterConfig;

/// A turn as the segmenter sees it.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub id: TurnId,
    pub session: Option<String>,
    /// Unit-length embedding of the whole turn; `None` for turns that are not embedded (roles
    /// outside the dense roles). Such a turn joins the open segment without a boundary decision.
    pub vector: Option<Vec<f32>>,
    pub tokens: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Member {
    id: TurnId,
    vector: Option<Vec<f32>>,
    tokens: u32,
}

/// The segment still being filled. Serialisable so it survives a restart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenSegment {
    session: Option<String>,
    members: Vec<Member>,
}

impl OpenSegment {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn turn_ids(&self) -> Vec<TurnId> {
        self.members.iter().map(|m| m.id.clone()).collect()
    }

    pub fn tokens(&self) -> u32 {
        self.members.iter().map(|m| m.tokens).sum()
    }

    /// Tokens of the members the boundary model sees (those with a vector): the evidence a
    /// topic shift is judged on.
    fn embedded_tokens(&self) -> u32 {
        self.members
            .iter()
            .filter(|m| m.vector.is_some())
            .map(|m| m.tokens)
            .sum()
    }

    /// Drops the given turns (and their vectors) from the segment, as a deletion requires.
    /// Returns whether any was a member.
    pub fn remove(&mut self, ids: &[TurnId]) -> bool {
        let before = self.members.len();
        self.members.retain(|m| !ids.contains(&m.id));
        if self.members.is_empty() {
            self.session = None;
        }
        self.members.len() != before
    }

    fn vectors(&self) -> impl Iterator<Item = &[f32]> + Clone {
        self.members.iter().filter_map(|m| m.vector.as_deref())
    }

    fn take(&mut self, reason: CloseReason, score: f32) -> Option<Closed> {
        if self.members.is_empty() {
            return None;
        }
        let tokens = self.tokens();
        let turns = self.turn_ids();
        self.members.clear();
        Some(Closed {
            turns,
            reason,
            score,
            tokens,
        })
    }
}

/// A segment the segmenter has just closed.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    pub turns: Vec<TurnId>,
    pub reason: CloseReason,
    /// `p_t` of the turn that ended it (1.0 for cuts forced by caps, sessions or flushes).
    pub score: f32,
    pub tokens: u32,
}

/// The terms of the boundary model for one turn, exposed for inspection and tuning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundaryFeatures {
    pub surprise: f32,
    pub cohesion_drop: f32,
    pub length: f32,
    pub count: f32,
    pub probability: f32,
}

/// Applies a [`SegmenterConfig`] to open segments.
#[derive(Debug, Clone, Default)]
pub struct Segmenter {
    config: SegmenterConfig,
}

impl Segmenter {
    pub fn new(config: SegmenterConfig) -> Self {
        Self { config }
    }

    pub fn config(&self) -> &SegmenterConfig {
        &self.config
    }

    /// The boundary model's view of `turn` against the open segment; `None` when the turn or the
    /// segment has no embedded turn to compare.
    pub fn features(&self, open: &OpenSegment, turn: &TurnInput) -> Option<BoundaryFeatures> {
        let c = &self.config;
        let v = turn.vector.as_deref()?;
        let last = open.vectors().last()?;
        let centroid = centroid(open.vectors());
        let surprise = 1.0 - dot(v, &centroid).max(dot(v, last));
        let before = cohesion(open.vectors());
        let after = cohesion(open.vectors().chain(std::iter::once(v)));
        let cohesion_drop = before - after;
        let length = (open.tokens() as f32 - c.target_tokens as f32)
            / (c.target_tokens - c.min_tokens) as f32;
        let count = open.members.len() as f32 / c.max_exchanges as f32;
        let phi = (surprise - c.surprise_center) / c.surprise_scale;
        let logit = c.bias
            + c.w_surprise * phi
            + c.w_cohesion * cohesion_drop
            + c.w_length * length
            + c.w_count * count;
        Some(BoundaryFeatures {
            surprise,
            cohesion_drop,
            length,
            count,
            probability: 1.0 / (1.0 + (-logit).exp()),
        })
    }

    /// Adds `turn`, returning the segments it closes (at most two: the one before it, and the one
    /// it completes when that reaches the exchange cap).
    pub fn push(&self, open: &mut OpenSegment, turn: TurnInput) -> Vec<Closed> {
        let c = &self.config;
        let mut closed = Vec::new();
        if !open.is_empty() {
            let cut = if open.session != turn.session {
                Some((CloseReason::SessionEnd, 1.0))
            } else if open.tokens() + turn.tokens > c.max_tokens {
                Some((CloseReason::MaxTokens, 1.0))
            } else if open.embedded_tokens() < c.min_tokens {
                // Too little said yet (in the turns the model compares) for a topic shift to be
                // told from a turn of another kind on the same topic: one encoder call reads a
                // topic, not an exchange.
                None
            } else {
                self.features(open, &turn)
                    .map(|f| f.probability)
                    .filter(|p| *p > c.threshold)
                    .map(|p| (CloseReason::TopicShift, p))
            };
            if let Some((reason, score)) = cut {
                closed.extend(open.take(reason, score));
            }
        }
        open.session = turn.session;
        open.members.push(Member {
            id: turn.id,
            vector: turn.vector,
            tokens: turn.tokens,
        });
        if open.members.len() as u32 >= c.max_exchanges {
            closed.extend(open.take(CloseReason::MaxExchanges, 1.0));
        } else if open.tokens() >= c.max_tokens {
            closed.extend(open.take(CloseReason::MaxTokens, 1.0));
        }
        closed
    }

    /// Closes the open segment, if any (end of a conversation, explicit flush).
    pub fn flush(&self, open: &mut OpenSegment) -> Option<Closed> {
        open.take(CloseReason::Flushed, 1.0)
    }
}

fn centroid<'a>(vectors: impl Iterator<Item = &'a [f32]>) -> Vec<f32> {
    let mut sum: Vec<f32> = Vec::new();
    for v in vectors {
        if sum.is_empty() {
            sum = vec![0.0; v.len()];
        }
        sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
    }
    let norm = dot(&sum, &sum).sqrt();
    if norm > 0.0 {
        sum.iter_mut().for_each(|s| *s /= norm);
    }
    sum
}

/// Mean similarity of the vectors to their normalised centroid (1 for a single vector).
fn cohesion<'a>(vectors: impl Iterator<Item = &'a [f32]> + Clone) -> f32 {
    let c = centroid(vectors.clone());
    let (sum, n) = vectors.fold((0.0, 0), |(s, n), v| (s + dot(v, &c), n + 1));
    if n == 0 { 1.0 } else { sum / n as f32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(dir: usize) -> Vec<f32> {
        let mut v = vec![0.0; 4];
        v[dir] = 1.0;
        v
    }

    fn input(n: usize, dir: usize, tokens: u32, session: &str) -> TurnInput {
        TurnInput {
            id: TurnId(format!("t{n}")),
            session: Some(session.into()),
            vector: Some(unit(dir)),
            tokens,
        }
    }

    #[test]
    fn same_topic_stays_together_and_a_new_topic_cuts() {
        let seg = Segmenter::default();
        let mut open = OpenSegment::default();
        for n in 0..4 {
            assert!(seg.push(&mut open, input(n, 0, 100, "s")).is_empty());
        }
        let closed = seg.push(&mut open, input(4, 1, 100, "s"));
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].reason, CloseReason::TopicShift);
        assert_eq!(closed[0].turns.len(), 4);
        assert!(closed[0].score > 0.5);
        assert_eq!(open.turn_ids(), vec![TurnId("t4".into())]);
    }

    #[test]
    fn session_change_always_cuts() {
        let seg = Segmenter::default();
        let mut open = OpenSegment::default();
        seg.push(&mut open, input(0, 0, 10, "a"));
        let closed = seg.push(&mut open, input(1, 0, 10, "b"));
        assert_eq!(closed[0].reason, CloseReason::SessionEnd);
    }

    #[test]
    fn caps_force_cuts() {
        let seg = Segmenter::default();
        let mut open = OpenSegment::default();
        let mut closed = Vec::new();
        for n in 0..10 {
            closed.extend(seg.push(&mut open, input(n, 0, 5, "s")));
        }
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].reason, CloseReason::MaxExchanges);
        assert_eq!(closed[0].turns.len(), 10);
        assert!(open.is_empty());

        let big = seg.config().max_tokens * 3 / 4;
        seg.push(&mut open, input(20, 0, big, "s"));
        let closed = seg.push(&mut open, input(21, 0, big, "s"));
        assert_eq!(closed[0].reason, CloseReason::MaxTokens);
        assert_eq!(closed[0].tokens, big);
    }

    #[test]
    fn no_topic_cut_before_the_compared_turns_hold_min_tokens() {
        let seg = Segmenter::default();
        let floor = seg.config().min_tokens;
        let mut open = OpenSegment::default();
        seg.push(&mut open, input(0, 0, floor / 2, "s"));
        // A long turn without a vector (an assistant's reply) adds no evidence of the topic.
        let reply = TurnInput {
            vector: None,
            ..input(1, 0, floor * 4, "s")
        };
        assert!(seg.push(&mut open, reply).is_empty());
        // An unrelated question is no cut yet: half the floor has been said.
        let shift = input(2, 1, floor / 2, "s");
        assert!(seg.features(&open, &shift).unwrap().probability > 0.5);
        assert!(seg.push(&mut open, shift).is_empty());
        // Now the compared turns hold the floor: the next shift cuts.
        let closed = seg.push(&mut open, input(3, 2, 10, "s"));
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].reason, CloseReason::TopicShift);
        assert_eq!(closed[0].turns.len(), 3);
    }

    #[test]
    fn a_short_segment_resists_a_mild_shift_that_a_long_one_takes() {
        let seg = Segmenter::default();
        let mild = |n| {
            let mut v = vec![0.8f32, 0.6, 0.0, 0.0];
            let norm = (0.8f32 * 0.8 + 0.6 * 0.6).sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            TurnInput {
                id: TurnId(format!("m{n}")),
                session: None,
                vector: Some(v),
                tokens: 10,
            }
        };
        let mut short = OpenSegment::default();
        seg.push(
            &mut short,
            TurnInput {
                session: None,
                ..input(0, 0, 50, "s")
            },
        );
        let mut long = OpenSegment::default();
        for n in 0..8 {
            seg.push(
                &mut long,
                TurnInput {
                    session: None,
                    ..input(n, 0, 100, "s")
                },
            );
        }
        let p_short = seg.features(&short, &mild(0)).unwrap().probability;
        let p_long = seg.features(&long, &mild(1)).unwrap().probability;
        assert!(p_long > p_short, "{p_long} <= {p_short}");
    }

    #[test]
    fn turns_without_vectors_join_without_a_boundary_decision() {
        let seg = Segmenter::default();
        let mut open = OpenSegment::default();
        seg.push(&mut open, input(0, 0, seg.config().min_tokens, "s"));
        let unembedded = TurnInput {
            vector: None,
            ..input(1, 3, 10, "s")
        };
        assert!(seg.features(&open, &unembedded).is_none());
        assert!(seg.push(&mut open, unembedded).is_empty());
        // The next embedded turn is compared with the embedded members only.
        let closed = seg.push(&mut open, input(2, 1, 10, "s"));
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].turns.len(), 2);
    }

    #[test]
    fn state_round_trips_through_json() {
        let seg = Segmenter::default();
        let mut open = OpenSegment::default();
        seg.push(&mut open, input(0, 2, 30, "s"));
        let json = serde_json::to_string(&open).unwrap();
        let back: OpenSegment = serde_json::from_str(&json).unwrap();
        assert_eq!(back, open);
        assert_eq!(back.tokens(), 30);
    }

    #[test]
    fn flush_closes_whatever_is_open() {
        let seg = Segmenter::default();
        let mut open = OpenSegment::default();
        assert!(seg.flush(&mut open).is_none());
        seg.push(&mut open, input(0, 0, 30, "s"));
        assert_eq!(seg.flush(&mut open).unwrap().reason, CloseReason::Flushed);
    }

    #[test]
    fn remove_drops_members_and_their_tokens() {
        let seg = Segmenter::default();
        let mut open = OpenSegment::default();
        seg.push(&mut open, input(0, 0, 30, "s"));
        seg.push(&mut open, input(1, 0, 20, "s"));
        assert!(open.remove(&[TurnId("t0".into())]));
        assert_eq!(open.turn_ids(), vec![TurnId("t1".into())]);
        assert_eq!(open.tokens(), 20);
        assert!(!open.remove(&[TurnId("t0".into())]));
        assert!(open.remove(&[TurnId("t1".into())]));
        assert!(open.is_empty());
    }
}
