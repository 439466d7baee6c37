//! A user's current cards, searchable: dense over the cards' vectors (stored with the cards; a
//! card without one, from an older aril or another model, is embedded here and its vector held
//! with the index: building the index is part of a read, and readers do not write; `aril
//! reindex` stores them), BM25 over their text, entities and
//! topics. With an embedded store both searches run over indexes held here (vectors in memory, a
//! memory-held tantivy index); a store that searches itself (PostgreSQL) answers them, and only
//! the cards and their vectors (for near-duplicate checks) are held here. Built on first use and
//! rebuilt whenever the store's cards of the user change, whoever changed them
//! ([`aril_store::Store::cards_generation`]), so it never shows a card the store no longer has.
//! Superseded cards, and cards a forgetting says no longer hold, are left out: recall shows
//! what holds now.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use aril_core::{Card, CardId, ScopeFilter, UnitKind};
use aril_index::{FromStore, Hit, LexicalIndex, UnitSearch, VectorIndex, Watermark};
use aril_store::{CardVectors, Store, StoredChunk, UnitText, UnitVectors};
use chrono::{DateTime, Utc};

use crate::{Engine, EngineError};

pub(crate) struct CardIndex {
    cards: HashMap<CardId, Card>,
    /// The cards' vectors (near-duplicate checks, and dense search when cards are searched here).
    vectors: VectorIndex,
    /// BM25 over the cards: `Some` exactly when cards are searched here, `None` when the
    /// engine's search indexes them ([`UnitSearch::indexes_cards`]).
    lexical: Option<LexicalIndex>,
    /// The embedding model of the vectors.
    model: String,
    /// The store's [`aril_store::Store::cards_generation`] this was built at.
    generation: (u64, i64),
    /// When the first of its cards stops holding (a forgetting dated later than the build):
    /// from then on the index is stale, though no card changed.
    stale_at: Option<DateTime<Utc>>,
}

/// What [`Engine::current_cards_with_vectors`] finds for a user.
struct CardsAndVectors {
    cards: Vec<Card>,
    model: String,
    stored: HashMap<CardId, Vec<StoredChunk>>,
    fresh: Vec<CardVectors>,
}

/// A user's card index with the engine's search beside it, for one query.
pub(crate) struct CardsView<'a> {
    index: Arc<CardIndex>,
    search: &'a dyn UnitSearch,
    store: &'a dyn Store,
}

impl CardsView<'_> {
    /// The user's current cards.
    pub fn cards(&self) -> &HashMap<CardId, Card> {
        &self.index.cards
    }

    pub fn dense(
        &self,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
    ) -> Result<Vec<Hit>, EngineError> {
        Ok(match &self.index.lexical {
            Some(_) => self.index.vectors.search(
                filter,
                query,
                k,
                &[UnitKind::Card],
                &FromStore {
                    store: self.store,
                    model: &self.index.model,
                },
            )?,
            None => self.search.dense(
                self.store,
                &self.index.model,
                filter,
                query,
                k,
                UnitKind::Card,
            )?,
        })
    }

    pub fn lexical(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
    ) -> Result<Vec<Hit>, EngineError> {
        Ok(match &self.index.lexical {
            Some(lexical) => lexical.search(filter, query, k, &[UnitKind::Card], None)?,
            None => self
                .search
                .lexical(filter, query, k, UnitKind::Card, None)?,
        })
    }

    /// The best cosine between two cards' chunks (0 when either has no vector).
    pub fn similarity(&self, a: &CardId, b: &CardId) -> f32 {
        self.index.vectors.similarity(&a.0, &b.0)
    }
}

impl Engine {
    /// The card index of a user, built when absent or stale.
    /// Built outside the lock (other users' recalls go on); of two readers building the same
    /// user's index at once, both build and the later one's is kept.
    pub(crate) fn card_index(&self, user_id: &str) -> Result<CardsView<'_>, EngineError> {
        let generation = self.store.cards_generation(user_id)?;
        let held = self
            .card_indexes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(user_id)
            .filter(|i| i.generation == generation && i.stale_at.is_none_or(|t| t > Utc::now()))
            .cloned();
        let index = match held {
            Some(index) => index,
            None => {
                let index = Arc::new(self.build_card_index(user_id, generation)?);
                self.card_indexes
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(user_id.to_string(), index.clone());
                index
            }
        };
        Ok(CardsView {
            index,
            search: &*self.search,
            store: &*self.store,
        })
    }

    /// Forgets the card index of a user (its cards changed).
    pub(crate) fn drop_card_index(&mut self, user_id: &str) {
        self.card_indexes
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(user_id);
    }

    /// A user's current cards, the vectors the store holds for them under the engine's model,
    /// and the vectors of the cards it lacks (written by an older aril or under another model),
    /// embedded now and not stored.
    fn current_cards_with_vectors(&self, user_id: &str) -> Result<CardsAndVectors, EngineError> {
        let cards = self.store.cards(&ScopeFilter::user(user_id), true)?;
        let model = self.embedder()?.name().to_string();
        let ids: Vec<CardId> = cards.iter().map(|c| c.id.clone()).collect();
        let stored = self.store.card_vectors(&model, &ids)?;
        let missing: Vec<Card> = cards
            .iter()
            .filter(|c| !stored.contains_key(&c.id))
            .cloned()
            .collect();
        let fresh = self.card_vectors(&missing)?;
        Ok(CardsAndVectors {
            cards,
            model,
            stored,
            fresh,
        })
    }

    /// Stores the vectors every user's current cards lack under the engine's model (`aril
    /// reindex`); returns how many cards got them. Readers only hold such vectors with the index
    /// they build, so until this runs each rebuild of that index embeds them again.
    pub(crate) fn store_missing_card_vectors(&mut self) -> Result<usize, EngineError> {
        let mut stored = 0;
        for user_id in self.users()? {
            let fresh = self.current_cards_with_vectors(&user_id)?.fresh;
            if !fresh.is_empty() {
                self.store.put_card_vectors(&fresh)?;
                stored += fresh.len();
            }
        }
        Ok(stored)
    }

    fn build_card_index(
        &self,
        user_id: &str,
        generation: (u64, i64),
    ) -> Result<CardIndex, EngineError> {
        let CardsAndVectors {
            cards,
            model,
            mut stored,
            fresh,
        } = self.current_cards_with_vectors(user_id)?;
        if !fresh.is_empty() {
            tracing::warn!(
                user_id,
                cards = fresh.len(),
                %model,
                "cards without stored vectors under this model were embedded for this index only: \
                 run `aril reindex` to store them"
            );
            stored.extend(fresh.into_iter().map(|v| (v.card, v.chunks)));
        }
        let mut vectors = VectorIndex::default();
        vectors.load_user(
            user_id,
            &model,
            cards
                .iter()
                .filter_map(|c| {
                    stored.remove(&c.id).map(|chunks| UnitVectors {
                        kind: UnitKind::Card,
                        id: c.id.0.clone(),
                        seq: 0,
                        scope: c.scope.clone(),
                        chunks,
                    })
                })
                .collect(),
        )?;
        let lexical = match self.search.indexes_cards() {
            true => None,
            false => {
                let lexical = LexicalIndex::in_memory()?;
                let units: Vec<UnitText> = cards
                    .iter()
                    .zip(0..)
                    .map(|(c, seq)| UnitText {
                        kind: UnitKind::Card,
                        id: c.id.0.clone(),
                        scope: c.scope.clone(),
                        text: aril_store::card_lexical_text(c),
                        seq,
                        role: None,
                    })
                    .collect();
                lexical.add(&units, Watermark::default())?;
                Some(lexical)
            }
        };
        tracing::debug!(user_id, cards = cards.len(), "card index built");
        Ok(CardIndex {
            stale_at: cards.iter().filter_map(|c| c.valid_to).min(),
            cards: cards.into_iter().map(|c| (c.id.clone(), c)).collect(),
            vectors,
            lexical,
            model,
            generation,
        })
    }
}
