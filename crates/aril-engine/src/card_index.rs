//! A user's current cards, searchable: dense over the cards' vectors (stored in the store with the
//! cards; a card without one is embedded here and the vector stored), BM25 over their text,
//! entities and topics in a memory-held tantivy index. Derived from the store on first use and
//! dropped whenever the user's cards change (consolidation, deletion), so it never shows a card
//! the store no longer has. Superseded cards are left out: recall shows what holds now.

use std::collections::HashMap;

use aril_core::{Card, CardId, ScopeFilter};
use aril_index::{Hit, LexicalIndex, VectorIndex, VectorSearch, Watermark};
use aril_store::{UnitKind, UnitText, UnitVectors};

use crate::{Engine, EngineError};

pub(crate) struct CardIndex {
    pub cards: HashMap<CardId, Card>,
    vectors: VectorIndex,
    lexical: LexicalIndex,
}

/// What BM25 sees of a card: its text, entities and topics.
fn lexical_text(card: &Card) -> String {
    let mut text = card.text.clone();
    for extra in card.entities.iter().chain(&card.topics) {
        text.push(' ');
        text.push_str(extra);
    }
    text
}

impl CardIndex {
    pub fn dense(&self, filter: &ScopeFilter, query: &[f32], k: usize) -> Vec<Hit> {
        self.vectors.search(filter, query, k, &[UnitKind::Card])
    }

    pub fn lexical(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
    ) -> Result<Vec<Hit>, EngineError> {
        Ok(self.lexical.search(filter, query, k, &[UnitKind::Card])?)
    }

    /// The best cosine between two cards' chunks (0 when either has no vector).
    pub fn similarity(&self, a: &CardId, b: &CardId) -> f32 {
        self.vectors.similarity(&a.0, &b.0)
    }
}

impl Engine {
    /// The card index of a user, built when absent.
    pub(crate) fn card_index(&mut self, user_id: &str) -> Result<&CardIndex, EngineError> {
        if !self.card_indexes.contains_key(user_id) {
            let index = self.build_card_index(user_id)?;
            self.card_indexes.insert(user_id.to_string(), index);
        }
        Ok(&self.card_indexes[user_id])
    }

    /// Forgets the card index of a user (its cards changed).
    pub(crate) fn drop_card_index(&mut self, user_id: &str) {
        self.card_indexes.remove(user_id);
    }

    fn build_card_index(&mut self, user_id: &str) -> Result<CardIndex, EngineError> {
        let cards = self.store.cards(&ScopeFilter::user(user_id), true)?;
        let model = self.embedder()?.name().to_string();
        let ids: Vec<CardId> = cards.iter().map(|c| c.id.clone()).collect();
        let mut stored = self.store.card_vectors(&model, &ids)?;
        let missing: Vec<&Card> = cards
            .iter()
            .filter(|c| !stored.contains_key(&c.id))
            .collect();
        if !missing.is_empty() {
            let missing: Vec<Card> = missing.into_iter().cloned().collect();
            let fresh = self.card_vectors(&missing)?;
            self.store.put_card_vectors(&fresh)?;
            stored.extend(fresh.into_iter().map(|v| (v.card, v.chunks)));
        }
        let mut vectors = VectorIndex::default();
        vectors.load_user(
            user_id,
            cards
                .iter()
                .filter_map(|c| {
                    stored.remove(&c.id).map(|chunks| UnitVectors {
                        kind: UnitKind::Card,
                        id: c.id.0.clone(),
                        scope: c.scope.clone(),
                        chunks,
                    })
                })
                .collect(),
        );
        let mut lexical = LexicalIndex::in_memory()?;
        let units: Vec<UnitText> = cards
            .iter()
            .zip(0..)
            .map(|(c, seq)| UnitText {
                kind: UnitKind::Card,
                id: c.id.0.clone(),
                scope: c.scope.clone(),
                text: lexical_text(c),
                seq,
            })
            .collect();
        lexical.add(&units, Watermark::default())?;
        tracing::debug!(user_id, cards = cards.len(), "card index built");
        Ok(CardIndex {
            cards: cards.into_iter().map(|c| (c.id.clone(), c)).collect(),
            vectors,
            lexical,
        })
    }
}
