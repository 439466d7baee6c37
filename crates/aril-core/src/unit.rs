//! The units recall ranks (turns, segments, cards) and the kinds of document a search index holds
//! for them. A [`UnitId`] names one unit with its type, so an id never travels as a bare string
//! beside a kind that says how to read it.

use serde::{Deserialize, Serialize};

use crate::{CardId, SegmentId, TurnId};

/// Which kind of unit a vector, a search document or a hit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnitKind {
    Turn,
    Segment,
    /// A card; cards are indexed per user, beside the turns and segments.
    Card,
    /// A turn searched by its lexical window ([`crate::window_text`]): the turn with its
    /// session neighbours. Its id is the turn's; a hit of this kind stands for the turn.
    Window,
}

impl UnitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::Turn => "turn",
            UnitKind::Segment => "segment",
            UnitKind::Card => "card",
            UnitKind::Window => "window",
        }
    }
}

/// One unit recall can rank: a turn, a segment or a card.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "id", rename_all = "lowercase")]
pub enum UnitId {
    Turn(TurnId),
    Segment(SegmentId),
    Card(CardId),
}

impl UnitId {
    /// The unit a document of `kind` with `id` stands for: a window stands for its turn.
    pub fn of(kind: UnitKind, id: String) -> Self {
        match kind {
            UnitKind::Turn | UnitKind::Window => UnitId::Turn(TurnId(id)),
            UnitKind::Segment => UnitId::Segment(SegmentId(id)),
            UnitKind::Card => UnitId::Card(CardId(id)),
        }
    }

    /// Turn, segment or card (never window: a window's unit is its turn).
    pub fn kind(&self) -> UnitKind {
        match self {
            UnitId::Turn(_) => UnitKind::Turn,
            UnitId::Segment(_) => UnitKind::Segment,
            UnitId::Card(_) => UnitKind::Card,
        }
    }

    /// The id as stored.
    pub fn as_str(&self) -> &str {
        match self {
            UnitId::Turn(id) => &id.0,
            UnitId::Segment(id) => &id.0,
            UnitId::Card(id) => &id.0,
        }
    }

    /// The segment, when the unit is one.
    pub fn segment(&self) -> Option<&SegmentId> {
        match self {
            UnitId::Segment(id) => Some(id),
            _ => None,
        }
    }

    /// The card, when the unit is one.
    pub fn card(&self) -> Option<&CardId> {
        match self {
            UnitId::Card(id) => Some(id),
            _ => None,
        }
    }

    /// The turn, when the unit is one.
    pub fn turn(&self) -> Option<&TurnId> {
        match self {
            UnitId::Turn(id) => Some(id),
            _ => None,
        }
    }
}

impl std::fmt::Display for UnitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_stands_for_its_turn() {
        let unit = UnitId::of(UnitKind::Window, "t_1".into());
        assert_eq!(unit, UnitId::Turn(TurnId("t_1".into())));
        assert_eq!(unit.kind(), UnitKind::Turn);
        assert_eq!(
            UnitId::of(UnitKind::Card, "c_1".into()).kind(),
            UnitKind::Card
        );
        assert_eq!(UnitId::of(UnitKind::Segment, "s_1".into()).as_str(), "s_1");
    }
}
