//! The write path: validate, drop what is already stored, embed (through the cache), segment, and
//! commit each batch atomically with its closed segments and the conversation's open segment; then
//! bring the lexical index up to the store.
//!
//! Cost per dense-role turn: one embedding of `Speaker: text`, a model pass per sentence run or
//! chunk (`Config::turn_vectors`, cached by `Engine::vector_key`); per turn,
//! one o200k count and one segmenter step. Per closed segment: a vector pooled from its turns'
//! chunks (or, with `segment_vectors = "embedded"`, one chunked embedding of its text). No LLM
//! call.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use aril_core::{NewTurn, Role, Scope, Segment, SegmentId, Turn, TurnId, content_hash, tokens};
use aril_segment::{Closed, TurnInput};
use aril_store::{
    Embedding, OpenRead, OpenSegmentRecord, RevisionRecord, SegmentRecord, StoreError, TurnRecord,
    WriteBatch,
};
use chrono::Utc;
use serde::Serialize;

use crate::config::SegmentVectors;
use crate::pools::EmbedPools;
use crate::{Engine, EngineError};

/// How an ingest treats the end of its input.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Close each conversation's open segment when the input ends (a finished import). Streaming
    /// callers leave it false so the next turns can continue the segment.
    pub flush: bool,
    /// Leave the search indexes to the caller's [`Engine::index_committed`]: the turns are
    /// stored (durably) when the ingest returns and searchable once that is called. A server
    /// calls it after giving up its exclusive hold on the engine, so searches do not wait for
    /// the indexing. Otherwise the ingest indexes its commits as it goes, once per embedding
    /// pool (about a thousand turns), and all of them before it returns.
    pub index_later: bool,
}

/// Where an ingest stands, for progress bars.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

/// What an ingest did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestReport {
    pub turns_received: usize,
    pub turns_added: usize,
    /// Turns already stored (same stable id), or repeated inside the input.
    pub turns_skipped: usize,
    pub segments_closed: usize,
    /// Cache entries the ingest wrote: texts the model embedded and the segment vectors pooled
    /// from them (no model pass). [`Engine::model_work`] counts the model's part alone.
    pub embedded_texts: usize,
    /// True when the caller's cancel flag stopped the ingest between two batches; everything
    /// committed before stays.
    pub interrupted: bool,
    pub elapsed_s: f64,
}

type ConversationKey = (String, String);

/// What [`Engine::store_prepared`] stored.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stored {
    /// The stable id of every turn given, in order (also of those stored before).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub ids: Vec<TurnId>,
    /// For each turn given, whether it was stored before (same stable id).
    pub already_stored: Vec<bool>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub report: IngestReport,
}

/// Embeddings made for turns ahead of their write ([`Engine::prepare`]), by a reader: a server
/// embeds a request's turns beside other requests and holds the engine alone only to commit them.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    pub(crate) embeddings: Vec<Embedding>,
}

impl Prepared {
    /// How many texts were embedded ahead (those the cache lacked).
    pub fn embedded(&self) -> usize {
        self.embeddings.len()
    }
}

/// Tries of one batch when other writers keep advancing its open segment first.
const MAX_ATTEMPTS: usize = 50;

impl Engine {
    /// Ingests turns (any mix of scopes and conversations, each conversation in order). Invalid
    /// input is rejected before anything is written. Checks `cancel` between batches.
    pub fn ingest(
        &mut self,
        turns: Vec<NewTurn>,
        options: &IngestOptions,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<IngestReport, EngineError> {
        self.ingest_prepared(turns, &Prepared::default(), options, progress, cancel)
    }

    /// Embeds, through the cache, what [`Engine::ingest_prepared`] would embed for `turns`,
    /// without writing anything: the model's work, done beside other readers. Invalid input is
    /// rejected here as it would be by the ingest.
    pub fn prepare(&self, turns: &[NewTurn]) -> Result<Prepared, EngineError> {
        for t in turns {
            t.validate()?;
        }
        let texts: Vec<String> = turns
            .iter()
            .filter(|t| self.is_dense(t.role))
            .map(NewTurn::rendered)
            .collect();
        Ok(Prepared {
            embeddings: self.embed_cached(&texts, &[])?.1,
        })
    }

    /// The part of a client's write that holds the engine alone: stores turns whose model work a
    /// reader did ahead ([`Engine::prepare`]), closing their conversations' open segments with
    /// `flush`, and leaves their indexing to [`Engine::index_committed`], which runs beside
    /// reads. Says which of the turns were stored before (same stable id).
    pub fn store_prepared(
        &mut self,
        turns: Vec<NewTurn>,
        ahead: &Prepared,
        flush: bool,
    ) -> Result<Stored, EngineError> {
        let ids: Vec<TurnId> = turns.iter().map(NewTurn::id).collect();
        let known = self.store.existing_turns(&ids)?;
        let report = self.ingest_prepared(
            turns,
            ahead,
            &IngestOptions {
                flush,
                index_later: true,
            },
            &mut |_| {},
            &AtomicBool::new(false),
        )?;
        Ok(Stored {
            already_stored: ids.iter().map(|id| known.contains(id)).collect(),
            ids,
            report,
        })
    }

    /// [`Engine::ingest`] with embeddings made ahead by [`Engine::prepare`]: texts they hold are
    /// not embedded again, and each is committed with the first batch that uses it.
    pub fn ingest_prepared(
        &mut self,
        turns: Vec<NewTurn>,
        ahead: &Prepared,
        options: &IngestOptions,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<IngestReport, EngineError> {
        let started = Instant::now();
        for t in &turns {
            t.validate()?;
        }
        let mut report = IngestReport {
            turns_received: turns.len(),
            ..Default::default()
        };
        // Every conversation the input names, to flush even those with nothing new.
        let mut touched: Vec<(Scope, String)> = Vec::new();
        for t in &turns {
            if !touched
                .iter()
                .any(|(s, c)| s == &t.scope && c == &t.conversation)
            {
                touched.push((t.scope.clone(), t.conversation.clone()));
            }
        }
        // Drop repeats inside the input, then what the store already has.
        let mut seen = HashSet::new();
        let mut fresh: Vec<(TurnId, NewTurn)> = Vec::with_capacity(turns.len());
        for t in turns {
            let id = t.id();
            if seen.insert(id.clone()) {
                fresh.push((id, t));
            }
        }
        let ids: Vec<TurnId> = fresh.iter().map(|(id, _)| id.clone()).collect();
        let stored = self.store.existing_turns(&ids)?;
        fresh.retain(|(id, _)| !stored.contains(id));
        report.turns_skipped = report.turns_received - fresh.len();

        // Group by conversation, keeping each conversation's order.
        let mut order: Vec<ConversationKey> = Vec::new();
        let mut groups: HashMap<ConversationKey, Vec<(TurnId, NewTurn)>> = HashMap::new();
        for (id, t) in fresh {
            let key = (t.scope.key(), t.conversation.clone());
            if !groups.contains_key(&key) {
                order.push(key.clone());
            }
            groups.entry(key).or_default().push((id, t));
        }
        let batch = self.config.batch_size();
        let groups: Vec<Vec<(TurnId, NewTurn)>> = order
            .iter()
            .map(|key| groups.remove(key).unwrap_or_default())
            .collect();
        // The model sees a pool of texts at once, sorted by length so its batches pad little
        // (a commit batch of 64 alone would mix short and long texts: measured on LongMemEval,
        // 2.7 times the embedding time), and embeds the next pool on a thread of its own while
        // this one's batches are segmented and committed.
        let mut pools = EmbedPools::plan(&groups, batch);
        // Users whose commits the search indexes have not caught up with yet.
        let mut unindexed: Vec<String> = Vec::new();
        let mut stored = self.commit_groups(
            &groups,
            &mut pools,
            ahead,
            options,
            &mut unindexed,
            &mut report,
            progress,
            cancel,
        );
        if options.flush && !report.interrupted && stored.is_ok() {
            // Conversations with nothing new may still hold an open segment from earlier streaming;
            // the others were flushed with their last batch, so this finds them empty.
            match self.flush_open_segments(&touched) {
                Ok(closed) => {
                    report.segments_closed += closed;
                    for (scope, _) in &touched {
                        note_user(&mut unindexed, &scope.user_id);
                    }
                }
                Err(e) => stored = Err(e),
            }
        }
        // What was committed is made searchable even when the ingest stopped early (an error
        // or the cancel flag): the store keeps those batches.
        let indexed = if options.index_later {
            Ok(())
        } else {
            self.index_noted(&mut unindexed)
        };
        stored?;
        indexed?;
        report.elapsed_s = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Commits each conversation's new turns in batches, embedding pool by pool. Unless
    /// `index_later`, the search indexes catch up at each pool's start, while the model embeds
    /// the pool after it: one lexical commit per pool rather than per batch, so a bulk import
    /// does not keep the index merging beside the model. `unindexed` collects the users whose
    /// commits are not indexed yet.
    #[allow(clippy::too_many_arguments)]
    fn commit_groups(
        &mut self,
        groups: &[Vec<(TurnId, NewTurn)>],
        pools: &mut EmbedPools<'_>,
        ahead: &Prepared,
        options: &IngestOptions,
        unindexed: &mut Vec<String>,
        report: &mut IngestReport,
        progress: &mut dyn FnMut(Progress),
        cancel: &AtomicBool,
    ) -> Result<(), EngineError> {
        let batch = self.config.batch_size();
        let total: usize = groups.iter().map(Vec::len).sum();
        let mut done = 0;
        progress(Progress { done, total });
        let mut prepared: Vec<Embedding> = Vec::new();
        for group in groups {
            let Some((_, first)) = group.first() else {
                continue;
            };
            let scope = first.scope.clone();
            let conversation = first.conversation.clone();
            let mut open = self.store.open_segment(&scope, &conversation)?;
            let n_batches = group.len().div_ceil(batch);
            for (b, chunk) in group.chunks(batch).enumerate() {
                if cancel.load(Ordering::SeqCst) {
                    report.interrupted = true;
                    return Ok(());
                }
                if let Some(pool) = pools.starting_at(done) {
                    prepared = pools.take(self, pool, ahead)?;
                    if !options.index_later {
                        self.index_noted(unindexed)?;
                    }
                }
                let last = b + 1 == n_batches;
                let step = self.commit_batch(
                    &scope,
                    &conversation,
                    chunk,
                    &mut open,
                    options.flush && last,
                    Vec::new(),
                    &prepared,
                )?;
                note_user(unindexed, &scope.user_id);
                report.turns_added += step.turns_added;
                report.turns_skipped += step.turns_skipped;
                report.segments_closed += step.segments_closed;
                report.embedded_texts += step.embedded_texts;
                done += chunk.len();
                progress(Progress { done, total });
            }
        }
        Ok(())
    }

    /// [`Engine::index_committed`] for the users an ingest noted, who are then indexed.
    fn index_noted(&self, users: &mut Vec<String>) -> Result<(), EngineError> {
        if users.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = users.iter().map(String::as_str).collect();
        self.index_committed(&names)?;
        users.clear();
        Ok(())
    }

    /// Makes what the store holds for these users searchable (the lexical index caught up with
    /// every commit, the users' held vectors with theirs): after an ingest with
    /// [`IngestOptions::index_later`], beside searches.
    pub fn index_committed(&self, users: &[&str]) -> Result<(), EngineError> {
        let started = Instant::now();
        for user in users {
            self.search.committed(&*self.store, user)?;
        }
        tracing::debug!(
            indexing_ms = started.elapsed().as_secs_f64() * 1e3,
            "commits indexed"
        );
        Ok(())
    }

    /// [`Engine::ingest_batch`], again from what the store holds when another writer advanced the
    /// conversation's open segment first (a shared PostgreSQL store): the open segment is read
    /// again, turns the other writer stored are dropped, and the batch is segmented anew. `open`
    /// is the state the store holds afterwards.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit_batch(
        &mut self,
        scope: &Scope,
        conversation: &str,
        chunk: &[(TurnId, NewTurn)],
        open: &mut OpenRead,
        flush: bool,
        revisions: Vec<RevisionRecord>,
        prepared: &[Embedding],
    ) -> Result<IngestReport, EngineError> {
        let mut pending: Vec<(TurnId, NewTurn)> = chunk.to_vec();
        let mut skipped = 0;
        let mut attempt = 1;
        loop {
            let mut next = open.clone();
            match self.ingest_batch(
                scope,
                conversation,
                &pending,
                &mut next,
                flush,
                revisions.clone(),
                prepared,
            ) {
                Ok(mut step) => {
                    *open = next;
                    step.turns_skipped += skipped;
                    return Ok(step);
                }
                Err(EngineError::Store(StoreError::Conflict(what))) if attempt < MAX_ATTEMPTS => {
                    tracing::debug!(%what, attempt, "another writer went first; segmenting again");
                    *open = self.store.open_segment(scope, conversation)?;
                    let ids: Vec<TurnId> = pending.iter().map(|(id, _)| id.clone()).collect();
                    let stored = self.store.existing_turns(&ids)?;
                    let before = pending.len();
                    pending.retain(|(id, _)| !stored.contains(id));
                    skipped += before - pending.len();
                    std::thread::sleep(std::time::Duration::from_millis(5 * attempt as u64));
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Embeds, segments and commits one batch of one conversation's new turns, with the memory
    /// versions those turns hold. `open` is the open segment as read; it is advanced, and its
    /// version raised, when the batch commits. `prepared` holds cache entries embedded ahead of
    /// the batch and not committed yet; the batch commits those it uses.
    #[allow(clippy::too_many_arguments)]
    fn ingest_batch(
        &mut self,
        scope: &Scope,
        conversation: &str,
        chunk: &[(TurnId, NewTurn)],
        open: &mut OpenRead,
        flush: bool,
        revisions: Vec<RevisionRecord>,
        prepared: &[Embedding],
    ) -> Result<IngestReport, EngineError> {
        let now = Utc::now();
        let started = Instant::now();
        let rendered: Vec<String> = chunk.iter().map(|(_, t)| t.rendered()).collect();
        let dense_texts: Vec<String> = chunk
            .iter()
            .zip(&rendered)
            .filter(|((_, t), _)| self.is_dense(t.role))
            .map(|(_, text)| text.clone())
            .collect();
        let (embeddings, mut fresh) = self.embed_cached(&dense_texts, prepared)?;
        // The batch's cache keys, as `embed_cached` computed them.
        let wanted: HashSet<&str> = embeddings.iter().map(|e| e.text_hash.as_str()).collect();
        fresh.extend(
            prepared
                .iter()
                .filter(|e| wanted.contains(e.text_hash.as_str()))
                .cloned(),
        );
        let mut dense_vectors = embeddings.iter().map(Self::mean_vector);
        let mut turns: Vec<TurnRecord> = Vec::with_capacity(chunk.len());
        let mut closed: Vec<Closed> = Vec::new();
        for ((id, t), text) in chunk.iter().zip(&rendered) {
            let vector = if self.is_dense(t.role) {
                dense_vectors.next()
            } else {
                None
            };
            closed.extend(self.segmenter.push(
                &mut open.state,
                TurnInput {
                    id: id.clone(),
                    session: t.session.clone(),
                    vector,
                    tokens: tokens::count(text) as u32,
                },
            ));
            turns.push(TurnRecord {
                turn: Turn {
                    id: id.clone(),
                    seq: 0,
                    turn: t.clone(),
                    ingest_time: now,
                },
                text_hash: self.vector_key(text),
            });
        }
        if flush {
            closed.extend(self.segmenter.flush(&mut open.state));
        }
        let segments = self.build_segments(scope, conversation, &closed, &turns)?;
        let (segments, segment_fresh) = self.segment_vectors(segments, &fresh)?;
        fresh.extend(segment_fresh);
        let embedded_texts = fresh.len();
        let batch = WriteBatch {
            turns,
            segments,
            open_segments: vec![OpenSegmentRecord {
                scope: scope.clone(),
                conversation: conversation.to_string(),
                state: open.state.clone(),
                read_version: open.version,
            }],
            embeddings: fresh,
            revisions,
        };
        let storing = Instant::now();
        let committed = self.store.commit(batch)?;
        open.version += 1;
        tracing::debug!(
            turns = chunk.len(),
            preparing_ms = (storing - started).as_secs_f64() * 1e3,
            storing_ms = storing.elapsed().as_secs_f64() * 1e3,
            "batch stored"
        );
        Ok(IngestReport {
            turns_added: committed.turns_added,
            turns_skipped: committed.turns_skipped,
            segments_closed: committed.segments_added,
            embedded_texts,
            ..Default::default()
        })
    }

    /// Gives each segment its vector (as [`Config::segment_vectors`] says) and its record. A
    /// segment without dense-role turns has no vector. Returns the records and the cache entries to
    /// commit.
    pub(crate) fn segment_vectors(
        &mut self,
        segments: Vec<(Segment, Vec<String>)>,
        pending: &[Embedding],
    ) -> Result<(Vec<SegmentRecord>, Vec<Embedding>), EngineError> {
        let mut records = Vec::with_capacity(segments.len());
        let mut fresh: Vec<Embedding> = Vec::new();
        if self.config.segment_vectors == SegmentVectors::Embedded {
            // One batched pass over every segment text that has one.
            let texts: Vec<String> = segments
                .iter()
                .filter(|(_, dense)| !dense.is_empty())
                .map(|(_, dense)| dense.join("\n"))
                .collect();
            let (_, new) = self.embed_cached(&texts, pending)?;
            fresh.extend(new);
            for (segment, dense) in segments {
                let text_hash = self.vector_key(&dense.join("\n"));
                records.push(SegmentRecord { segment, text_hash });
            }
            return Ok((records, fresh));
        }
        // Pooled: member vectors come from this batch (`pending`) or the store, so no model call
        // is expected; `known` grows with what each segment adds.
        let model = self.embedder()?.name().to_string();
        let mut known: Vec<Embedding> = pending.to_vec();
        for (segment, dense) in segments {
            let text = dense.join("\n");
            let text_hash = if dense.is_empty() {
                content_hash(&[&text])
            } else {
                let (members, new) = self.embed_cached(&dense, &known)?;
                known.extend(new.iter().cloned());
                fresh.extend(new);
                let pooled = Self::pooled_embedding(&model, &self.variant, &text, &members);
                let key = pooled.text_hash.clone();
                if !fresh.iter().any(|e| e.text_hash == key) {
                    fresh.push(pooled);
                }
                key
            };
            records.push(SegmentRecord { segment, text_hash });
        }
        Ok((records, fresh))
    }

    /// Whether turns of `role` get dense vectors (`dense_roles`).
    pub(crate) fn is_dense(&self, role: Role) -> bool {
        self.config.dense_roles.contains(&role)
    }

    /// Turns closed segmenter output into segments with the rendered texts of their dense-role
    /// turns. Member turns from earlier batches are read from the store.
    pub(crate) fn build_segments(
        &self,
        scope: &Scope,
        conversation: &str,
        closed: &[Closed],
        batch: &[TurnRecord],
    ) -> Result<Vec<(Segment, Vec<String>)>, EngineError> {
        let in_batch: HashMap<&TurnId, &Turn> =
            batch.iter().map(|r| (&r.turn.id, &r.turn)).collect();
        let earlier: Vec<TurnId> = closed
            .iter()
            .flat_map(|c| c.turns.iter())
            .filter(|id| !in_batch.contains_key(id))
            .cloned()
            .collect();
        let stored = self.turns_by_id(&earlier)?;
        let mut out = Vec::with_capacity(closed.len());
        for c in closed {
            let members: Vec<Turn> = c
                .turns
                .iter()
                .map(|id| {
                    in_batch
                        .get(id)
                        .map(|t| (*t).clone())
                        .or_else(|| stored.get(id).cloned())
                        .ok_or_else(|| {
                            EngineError::Store(aril_store::StoreError::Corrupt(format!(
                                "open segment names turn {id}, which is not stored"
                            )))
                        })
                })
                .collect::<Result<_, _>>()?;
            let times = members.iter().filter_map(|t| t.turn.event_time);
            let segment = Segment {
                id: SegmentId::for_turns(&c.turns),
                scope: scope.clone(),
                conversation: conversation.to_string(),
                turns: c.turns.clone(),
                boundary_score: c.score,
                reason: c.reason,
                tokens: c.tokens,
                start_time: times.clone().min(),
                end_time: times.max(),
            };
            let dense: Vec<String> = members
                .iter()
                .filter(|t| self.is_dense(t.turn.role))
                .map(Turn::rendered)
                .collect();
            out.push((segment, dense));
        }
        Ok(out)
    }

    /// Closes the open segments of the given conversations. Returns how many segments closed.
    fn flush_open_segments(&mut self, keys: &[(Scope, String)]) -> Result<usize, EngineError> {
        let mut closed = 0;
        for (scope, conversation) in keys {
            let mut open = self.store.open_segment(scope, conversation)?;
            if open.state.is_empty() {
                continue;
            }
            let step =
                self.commit_batch(scope, conversation, &[], &mut open, true, Vec::new(), &[])?;
            closed += step.segments_closed;
        }
        Ok(closed)
    }
}

/// Adds `user` to `users` unless it is there.
fn note_user(users: &mut Vec<String>, user: &str) {
    if !users.iter().any(|u| u == user) {
        users.push(user.to_string());
    }
}
