//! Moving a store between backends: SQLite → PostgreSQL → SQLite keeps every table (counts and
//! content hashes equal), a move cut short finishes when run again without doubling anything,
//! and a PostgreSQL target searches what it received.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use aril_core::{
    Card, CardId, CardKind, CardTime, CloseReason, NewTurn, Role, Scope, ScopeFilter, Segment,
    SegmentId, Turn, TurnId, UnitKind,
};
use aril_store::scratch::ScratchDatabase;
use aril_store::transfer::{Table, copy, fingerprint};
use aril_store::{
    ApiKeyRecord, CardBatch, CardVectors, Embedding, LlmCall, OpenSegmentRecord, PgStore,
    RevisionRecord, SegmentRecord, SqliteStore, Store, StoredChunk, TurnRecord, WriteBatch,
};
use chrono::{TimeZone, Utc};

fn turn(user: &str, n: u32, text: &str) -> TurnRecord {
    let t = NewTurn {
        scope: Scope::user(user).unwrap(),
        conversation: "c".into(),
        session: Some("s1".into()),
        role: if n.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        },
        speaker: None,
        text: text.into(),
        event_time: Some(
            Utc.with_ymd_and_hms(2024, 5, 1, 0, 0, 0).unwrap()
                + chrono::Duration::minutes(n.into()),
        ),
        source_id: Some(format!("D1:{n}")),
        metadata: None,
        lifecycle: Default::default(),
    };
    TurnRecord {
        turn: Turn {
            id: t.id(),
            seq: 0,
            turn: t,
            // Nanoseconds: kept to the microsecond by a move into PostgreSQL.
            ingest_time: Utc.timestamp_nanos(1_714_550_400_123_456_789),
        },
        text_hash: format!("h-{user}-{n}"),
    }
}

fn vector(x: f32) -> Vec<StoredChunk> {
    vec![StoredChunk {
        start: 0,
        end: 4,
        vector: vec![x, (1.0 - x * x).sqrt()],
    }]
}

/// A store holding a row of every kind: 694 turns (more than a page) over two users, segments
/// in each queue state, an open segment, memory versions, cards with vectors and a supersession,
/// an encoder state, token accounting and an API key.
fn fill(store: &mut dyn Store) {
    for user in ["ana", "rui"] {
        let turns: Vec<TurnRecord> = (0..346)
            .map(|n| {
                turn(
                    user,
                    n,
                    &format!("{user} note {n}: the lighthouse keeper {}", n % 7),
                )
            })
            .collect();
        let embeddings: Vec<Embedding> = turns
            .iter()
            .enumerate()
            .map(|(i, t)| Embedding {
                model: "m".into(),
                text_hash: t.text_hash.clone(),
                pieces: 4,
                chunks: vector((i % 10) as f32 / 10.0),
            })
            .collect();
        let segments: Vec<SegmentRecord> = turns[..340]
            .chunks(10)
            .map(|group| {
                let ids: Vec<TurnId> = group.iter().map(|t| t.turn.id.clone()).collect();
                SegmentRecord {
                    segment: Segment {
                        id: SegmentId::for_turns(&ids),
                        scope: Scope::user(user).unwrap(),
                        conversation: "c".into(),
                        turns: ids,
                        boundary_score: 0.61,
                        reason: CloseReason::TopicShift,
                        tokens: 120,
                        start_time: group[0].turn.turn.event_time,
                        end_time: group[9].turn.turn.event_time,
                    },
                    text_hash: format!("h-{user}-0"),
                }
            })
            .collect();
        // The corrected note no longer holds from 2025 on (a forgetting): its end moves too.
        let mut edited = turn(user, 400, &format!("{user} note 0, corrected"));
        edited.turn.turn.lifecycle.valid_to =
            Some(Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap());
        let mut open = aril_segment::OpenSegment::default();
        let seg = aril_segment::Segmenter::default();
        for t in turns[340..].iter().chain([&edited]) {
            seg.push(
                &mut open,
                aril_segment::TurnInput {
                    id: t.turn.id.clone(),
                    session: Some("s1".into()),
                    vector: Some(vec![0.6, 0.8]),
                    tokens: 9,
                },
            );
        }
        store
            .commit(WriteBatch {
                turns: turns.iter().cloned().chain([edited.clone()]).collect(),
                segments: segments.clone(),
                open_segments: vec![OpenSegmentRecord {
                    scope: Scope::user(user).unwrap(),
                    conversation: "c".into(),
                    state: open,
                    read_version: 0,
                }],
                embeddings,
                revisions: vec![RevisionRecord {
                    memory: turns[0].turn.id.clone(),
                    version: 2,
                    turn: edited.turn.id.clone(),
                }],
            })
            .unwrap();
        let first = &segments[0].segment;
        let card = |n: u32, supersedes: Vec<CardId>| Card {
            id: CardId(format!("c_{user}_{n}")),
            scope: first.scope.clone(),
            segment: first.id.clone(),
            kind: CardKind::Fact,
            text: format!("{user} keeps the lighthouse, version {n}"),
            entities: vec!["Lighthouse".into(), user.into()],
            topics: vec!["work".into()],
            time: Some(CardTime {
                start: Some(Utc.with_ymd_and_hms(2024, 5, 1, 0, 0, 0).unwrap()),
                end: None,
                granularity: "day".into(),
            }),
            source_turns: first.turns[..2].to_vec(),
            valid_from: Some(Utc.with_ymd_and_hms(2024, 5, 2, 9, 0, 0).unwrap()),
            valid_to: (n == 2).then(|| Utc.with_ymd_and_hms(2025, 2, 1, 0, 0, 0).unwrap()),
            supersedes,
        };
        let c1 = card(1, vec![]);
        let c2 = card(2, vec![c1.id.clone()]);
        store
            .commit_cards(CardBatch {
                segment: first.id.clone(),
                cards: vec![c1.clone(), c2.clone()],
                scope: first.scope.clone(),
                conversation: "c".into(),
                state: serde_json::json!({"aliases": {"the keeper": user, "a": [1, 2]}}),
                vectors: vec![
                    CardVectors {
                        card: c1.id.clone(),
                        model: "m".into(),
                        chunks: vector(0.3),
                    },
                    CardVectors {
                        card: c2.id.clone(),
                        model: "m".into(),
                        chunks: vector(0.9),
                    },
                ],
            })
            .unwrap();
        store
            .mark_failed(&segments[1].segment.id, "the reply was cut off")
            .unwrap();
        // A claim in flight is not part of the memory: it is not moved.
        store
            .claim(None, 1, false, Duration::from_secs(600))
            .unwrap();
    }
    store
        .record_llm_calls(&[LlmCall {
            at: Utc.timestamp_nanos(1_714_550_400_987_654_321),
            purpose: "encode".into(),
            model: "smol".into(),
            prompt_tokens: 900,
            completion_tokens: 80,
            counted_locally: false,
            prompt_o200k: 870,
            completion_o200k: 77,
            latency_ms: 1500,
            attempts: 1,
        }])
        .unwrap();
    store
        .add_api_key(&ApiKeyRecord {
            id: "key_0001".into(),
            key_hash: "abc".into(),
            user_id: Some("ana".into()),
            admin: false,
            created: Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap(),
        })
        .unwrap();
}

fn rows(store: &dyn Store, table: Table) -> u64 {
    fingerprint(store)
        .unwrap()
        .tables
        .into_iter()
        .find(|t| t.table == table)
        .map(|t| t.rows)
        .unwrap()
}

#[test]
fn a_store_moves_to_postgres_and_back_with_every_table_equal() {
    let dir = tempfile::tempdir().unwrap();
    let mut source = SqliteStore::open(&dir.path().join("a.sqlite")).unwrap();
    fill(&mut source);
    let before = fingerprint(&source).unwrap();
    assert_eq!(rows(&source, Table::Turns), 694);
    source.check_integrity().unwrap();
    assert_eq!(rows(&source, Table::Cards), 4);

    let db = ScratchDatabase::new().unwrap_or_else(|e| panic!("{e}"));
    let mut pg = PgStore::open(db.url()).unwrap();
    // Cut short after the first page of turns: what was written stays, and the next run
    // finishes without doubling a row.
    let cancel = AtomicBool::new(false);
    let cut = copy(
        &source,
        &mut pg,
        &mut |p| {
            if p.table == Table::Turns {
                cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        },
        &cancel,
    )
    .unwrap();
    assert!(cut.interrupted);
    assert_eq!(rows(&pg, Table::Turns), 500);
    let done = copy(&source, &mut pg, &mut |_| {}, &AtomicBool::new(false)).unwrap();
    assert!(!done.interrupted);
    // Run once more: nothing changes.
    copy(&source, &mut pg, &mut |_| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(fingerprint(&pg).unwrap(), before);
    pg.check_integrity().unwrap();

    // The target searches what it received, and its queue kept each segment's state.
    let search = pg.searcher();
    let ana = ScopeFilter::user("ana");
    assert_eq!(
        search
            .lexical(&ana, "note 17", 3, UnitKind::Turn, None)
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        search
            .dense("m", &ana, &[0.0, 1.0], 5, UnitKind::Turn)
            .unwrap()
            .len(),
        5
    );
    let stats = pg.stats().unwrap();
    assert_eq!((stats.segments_failed, stats.cards), (2, 4));
    assert_eq!(
        pg.claim(None, 100, false, Duration::ZERO).unwrap().len(),
        64
    );

    let back_dir = tempfile::tempdir().unwrap();
    let mut back = SqliteStore::open(&back_dir.path().join("b.sqlite")).unwrap();
    let pg = PgStore::open(db.url()).unwrap();
    copy(&pg, &mut back, &mut |_| {}, &AtomicBool::new(false)).unwrap();
    assert_eq!(fingerprint(&back).unwrap(), before);
    back.check_integrity().unwrap();
    assert_eq!(
        back.llm_usage().unwrap()[0].o200k_calls,
        1,
        "accounting moved once"
    );
}
