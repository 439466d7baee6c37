//! The k best documents of a query by score and every document tied with the k-th, in one
//! pruned pass. A search orders equal scores by unit id, which tantivy's own top-k collector
//! cannot do (it breaks ties by where a document happens to lie), so a cut inside a tie must see
//! the whole tie; asking tantivy again for twice as many until no tie is cut repeats the whole
//! query, and a memory full of repeated texts (the same short reply a thousand times) repeats it
//! often. Here the pruning threshold stays just below the k-th score, so ties still arrive while
//! everything lower is skipped (block-max WAND where the query is a union of terms). The k best
//! scores seen in the segments searched so far are where the next segment's threshold starts:
//! nothing under them can reach the final top k, so a large index of many segments does not
//! score each segment's weak matches again from nothing.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::{Mutex, PoisonError};

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::query::Weight;
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader};

/// Collects the `k` best documents and those tied with the k-th, best first.
pub(crate) struct TopWithTies {
    k: usize,
    /// The k best scores of the segments searched so far, the lowest on top.
    seen: Mutex<BinaryHeap<Reverse<Ranked>>>,
}

impl TopWithTies {
    pub(crate) fn new(k: usize) -> Self {
        Self {
            k: k.max(1),
            seen: Mutex::new(BinaryHeap::new()),
        }
    }
}

/// A score ordered totally (scores are never NaN; `total_cmp` makes that no concern).
#[derive(Clone, Copy, PartialEq)]
struct Ranked(Score);

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// One segment's share: its documents at or above its k-th score so far.
pub(crate) struct SegmentTop {
    k: usize,
    segment: SegmentOrdinal,
    kept: Vec<(Score, DocId)>,
    /// The k best scores so far, the lowest on top.
    best: BinaryHeap<Reverse<Ranked>>,
}

impl SegmentTop {
    /// The k-th best score so far (the lowest that can still be kept).
    fn floor(&self) -> Score {
        match self.best.peek() {
            Some(Reverse(Ranked(s))) if self.best.len() == self.k => *s,
            _ => Score::MIN,
        }
    }

    /// The score a document must exceed to be offered: just under the floor, so ties come.
    fn threshold(&self) -> Score {
        self.floor().next_down()
    }

    fn offer(&mut self, doc: DocId, score: Score) {
        if score < self.floor() {
            return;
        }
        self.kept.push((score, doc));
        push_best(&mut self.best, self.k, score);
        if self.kept.len() >= 4 * self.k.max(16) {
            let floor = self.floor();
            self.kept.retain(|(s, _)| *s >= floor);
        }
    }
}

/// The lowest of the best scores kept.
fn floor_of(best: &BinaryHeap<Reverse<Ranked>>) -> Score {
    best.peek().map_or(Score::MIN, |Reverse(Ranked(s))| *s)
}

/// Adds `score` to `best` if it is among the `k` best.
fn push_best(best: &mut BinaryHeap<Reverse<Ranked>>, k: usize, score: Score) {
    if best.len() < k {
        best.push(Reverse(Ranked(score)));
    } else if best.peek().is_some_and(|Reverse(low)| Ranked(score) > *low) {
        best.pop();
        best.push(Reverse(Ranked(score)));
    }
}

impl SegmentCollector for SegmentTop {
    type Fruit = Vec<(Score, DocAddress)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        self.offer(doc, score);
    }

    fn harvest(mut self) -> Self::Fruit {
        let floor = self.floor();
        self.kept.retain(|(s, _)| *s >= floor);
        let segment = self.segment;
        self.kept
            .into_iter()
            .map(|(s, doc)| (s, DocAddress::new(segment, doc)))
            .collect()
    }
}

impl Collector for TopWithTies {
    type Fruit = Vec<(Score, DocAddress)>;
    type Child = SegmentTop;

    fn for_segment(
        &self,
        segment: SegmentOrdinal,
        _reader: &SegmentReader,
    ) -> tantivy::Result<SegmentTop> {
        // The scores seen in other segments bound this one's floor from below: the segment
        // keeps only what can still reach the top k overall.
        let best = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Ok(SegmentTop {
            k: self.k,
            segment,
            kept: Vec::new(),
            best,
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Self::Fruit>) -> tantivy::Result<Self::Fruit> {
        let mut all: Vec<(Score, DocAddress)> = fruits.into_iter().flatten().collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0));
        if let Some(&(floor, _)) = all.get(self.k - 1) {
            all.retain(|(s, _)| *s >= floor);
        }
        Ok(all)
    }

    fn collect_segment(
        &self,
        weight: &dyn Weight,
        segment: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Fruit> {
        let mut top = self.for_segment(segment, reader)?;
        let alive = reader.alive_bitset();
        weight.for_each_pruning(top.threshold(), reader, &mut |doc, score| {
            if alive.is_none_or(|a| a.is_alive(doc)) {
                top.offer(doc, score);
            }
            top.threshold()
        })?;
        // This segment's best began as a copy of what had been seen, so it is the k best of
        // those and of this segment together (adding it to `seen` would count them twice). With
        // segments searched in parallel, the higher of the two floors is kept: either is the
        // k best of real, distinct documents.
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let longer = top.best.len() > seen.len();
        if longer || (top.best.len() == seen.len() && floor_of(&top.best) > floor_of(&seen)) {
            *seen = top.best.clone();
        }
        drop(seen);
        Ok(top.harvest())
    }
}
