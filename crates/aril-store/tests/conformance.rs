//! The storage seam's conformance suite: every behaviour test runs, with the same code, against
//! the embedded SQLite store and the PostgreSQL store (a scratch database on the test server:
//! `ARIL_TEST_PG_URL`, else the one `scripts/postgres start` runs). Atomic batches, idempotent
//! inserts, scoped deletion, memory versions and single-memory deletion, cards and their
//! structured indexes, accounting; then each backend's own schema guard.

use aril_core::{
    CloseReason, Metadata, Narrowing, NewTurn, Role, Scope, ScopeFilter, Segment, SegmentId,
    TimeSpan, Turn, TurnId, UnitKind,
};
use aril_segment::OpenSegment;
use aril_store::scratch::ScratchDatabase;
use aril_store::{
    Embedding, PgSearch, PgStore, RevisionRecord, SegmentRecord, SqliteStore, Store, StoreError,
    StoredChunk, TurnDeletion, TurnRecord, WriteBatch,
};
use chrono::{DateTime, SubsecRound, Utc};

/// Where a test's store lives; it can be opened again (to test persistence) while this exists.
enum Place {
    Sqlite(tempfile::TempDir),
    Postgres(ScratchDatabase),
}

impl Place {
    fn sqlite() -> Self {
        Place::Sqlite(tempfile::tempdir().unwrap())
    }

    fn postgres() -> Self {
        Place::Postgres(ScratchDatabase::new().unwrap_or_else(|e| panic!("{e}")))
    }

    fn open(&self) -> Box<dyn Store> {
        match self {
            Place::Sqlite(dir) => {
                Box::new(SqliteStore::open(&dir.path().join("s.sqlite")).unwrap())
            }
            Place::Postgres(db) => Box::new(PgStore::open(db.url()).unwrap()),
        }
    }

    /// A plain connection to a PostgreSQL place's database.
    fn admin(&self) -> ::postgres::Client {
        match self {
            Place::Sqlite(_) => panic!("not a PostgreSQL place"),
            Place::Postgres(db) => {
                ::postgres::Client::connect(db.url(), ::postgres::NoTls).unwrap()
            }
        }
    }

    /// The store's own search: PostgreSQL's (the embedded store has none; the engine indexes
    /// beside it, `aril_index::EmbeddedIndex`).
    fn searcher(&self) -> Option<PgSearch> {
        match self {
            Place::Sqlite(_) => None,
            Place::Postgres(db) => Some(PgStore::open(db.url()).unwrap().searcher()),
        }
    }
}

aril_store::conformance!(
    current_turn_facts_give_each_memorys_times_without_its_text,
    current_turn_facts_of_a_span_are_the_memories_first_said_inside_it,
    metadata_as_large_as_allowed_is_stored_indexed_and_read_back,
    current_turn_facts_narrowed_by_metadata_are_those_containing_an_object,
    a_batch_is_stored_whole_and_recommitting_adds_nothing,
    a_failing_batch_leaves_nothing_behind,
    delete_takes_one_scope_and_its_unshared_vectors,
    open_segments_persist_per_conversation,
    integrity_check_catches_a_turn_outside_the_segmentation,
    later_versions_supersede_earlier_ones_and_keep_the_memory_id,
    deleting_turns_swaps_their_segment_for_its_replacement_and_drops_their_vectors,
    closed_segments_queue_for_cards_and_cards_are_found_by_every_structured_index,
    appended_cards_supersede_and_deleted_cards_leave_their_turns,
    a_failed_segment_waits_for_a_retry_and_a_deleted_one_cannot_take_cards,
    llm_calls_are_summed_by_purpose_and_model_and_survive_reopen,
    api_keys_are_kept_with_their_grant,
    claims_are_exclusive_and_end_with_cards_a_failure_or_a_release,
    a_store_that_searches_itself_finds_by_vector_and_by_word_and_forgets_deleted_units,
    a_role_restricted_word_search_returns_those_roles_turns_scored_as_among_all,
    segments_are_listed_a_page_at_a_time_in_store_order_with_their_total,
    a_scopes_summary_counts_its_own_memory_only,
    cards_are_found_a_page_at_a_time_by_kind_entity_topic_and_day,
    calls_and_turns_are_summed_per_utc_day,
    a_sessions_turns_are_those_said_in_it_in_store_order,
);

fn turn(user: &str, n: usize) -> TurnRecord {
    let t = NewTurn {
        scope: Scope::user(user).unwrap(),
        conversation: "c".into(),
        session: None,
        role: Role::User,
        speaker: None,
        text: format!("turn number {n} of {user}"),
        event_time: None,
        source_id: Some(format!("D1:{n}")),
        metadata: (n == 2).then(|| turn_metadata(user)),
        lifecycle: Default::default(),
    };
    TurnRecord {
        turn: Turn {
            id: t.id(),
            seq: 0,
            turn: t,
            ingest_time: Utc::now(),
        },
        text_hash: format!("h-{user}-{n}"),
    }
}

/// What the second turn of each user carries: nested values, unicode, a float.
fn turn_metadata(user: &str) -> Metadata {
    Metadata::try_from(serde_json::json!({
        "user": user, "tags": ["café", 3], "nested": {"score": 1.5, "ok": true, "none": null}
    }))
    .unwrap()
}

fn embedding(hash: &str) -> Embedding {
    Embedding {
        model: "m".into(),
        text_hash: hash.into(),
        pieces: 3,
        chunks: vec![StoredChunk {
            start: 0,
            end: 3,
            vector: vec![1.0, 0.0],
        }],
    }
}

fn segment(user: &str, turns: &[&TurnRecord]) -> SegmentRecord {
    let ids: Vec<TurnId> = turns.iter().map(|t| t.turn.id.clone()).collect();
    SegmentRecord {
        segment: Segment {
            id: SegmentId::for_turns(&ids),
            scope: Scope::user(user).unwrap(),
            conversation: "c".into(),
            turns: ids,
            boundary_score: 0.7,
            reason: CloseReason::TopicShift,
            tokens: 12,
            start_time: None,
            end_time: None,
        },
        text_hash: format!("seg-{user}"),
    }
}

/// Commits turns (with their vectors) in one batch, closing no segment.
fn commit_turns(store: &mut dyn Store, turns: &[TurnRecord]) {
    store
        .commit(WriteBatch {
            embeddings: turns.iter().map(|t| embedding(&t.text_hash)).collect(),
            turns: turns.to_vec(),
            ..Default::default()
        })
        .unwrap();
}

fn fill(store: &mut dyn Store, user: &str) -> Vec<TurnRecord> {
    let turns: Vec<TurnRecord> = (1..=3).map(|n| turn(user, n)).collect();
    let mut embeddings: Vec<Embedding> = turns.iter().map(|t| embedding(&t.text_hash)).collect();
    embeddings.push(embedding(&format!("seg-{user}")));
    store
        .commit(WriteBatch {
            turns: turns.clone(),
            segments: vec![segment(user, &turns.iter().collect::<Vec<_>>())],
            open_segments: vec![],
            embeddings,
            revisions: vec![],
        })
        .unwrap();
    turns
}

fn segments_are_listed_a_page_at_a_time_in_store_order_with_their_total(place: &Place) {
    let mut store = place.open();
    // Five one-turn segments of `u`, committed one batch each, and one of `v` between them.
    let mut order = Vec::new();
    for n in 1..=5 {
        let t = turn("u", n);
        let mut seg = segment("u", &[&t]);
        seg.text_hash = format!("seg-u-{n}");
        order.push(seg.segment.id.clone());
        let mut batch = WriteBatch {
            embeddings: vec![embedding(&t.text_hash), embedding(&seg.text_hash)],
            turns: vec![t],
            segments: vec![seg],
            open_segments: vec![],
            revisions: vec![],
        };
        if n == 3 {
            let other = turn("v", 1);
            batch.segments.push(segment("v", &[&other]));
            batch.embeddings.push(embedding(&other.text_hash));
            batch.embeddings.push(embedding("seg-v"));
            batch.turns.push(other);
        }
        store.commit(batch).unwrap();
    }
    let page = |offset, limit| {
        let (segments, total) = store
            .list_segments(&ScopeFilter::user("u"), offset, limit)
            .unwrap();
        let ids: Vec<SegmentId> = segments.into_iter().map(|s| s.id).collect();
        (ids, total)
    };
    assert_eq!(page(0, 2), (order[..2].to_vec(), 5));
    assert_eq!(page(2, 2), (order[2..4].to_vec(), 5));
    assert_eq!(page(4, 2), (order[4..].to_vec(), 5));
    assert_eq!(page(5, 2), (vec![], 5));
    assert_eq!(page(0, u64::MAX), (order.clone(), 5));
    let (theirs, total) = store.list_segments(&ScopeFilter::user("v"), 0, 10).unwrap();
    assert_eq!((theirs.len(), total), (1, 1));
    assert_eq!(theirs[0].turns, vec![turn("v", 1).turn.id]);
}

fn a_batch_is_stored_whole_and_recommitting_adds_nothing(place: &Place) {
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    let again = store
        .commit(WriteBatch {
            turns: turns.clone(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(again.turns_added, 0);
    assert_eq!(again.turns_skipped, 3);
    let stats = store.stats().unwrap();
    assert_eq!(
        (stats.turns, stats.segments, stats.segmented_turns),
        (3, 1, 3)
    );
    store.check_integrity().unwrap();
    let ids: Vec<TurnId> = turns.iter().map(|t| t.turn.id.clone()).collect();
    let back = store.turns(&ids).unwrap();
    assert_eq!(back.len(), 3);
    assert_eq!(back[0].turn.text, "turn number 1 of u");
    assert!(back[0].seq < back[1].seq);
    assert_eq!(back[0].turn.metadata, None);
    assert_eq!(
        back[1].turn.metadata,
        Some(turn_metadata("u")),
        "kept verbatim"
    );

    // Read for a catch-up a page at a time: the first turns and segments after the orders given.
    let kinds = |units: &[aril_store::UnitText]| -> Vec<(UnitKind, String)> {
        units.iter().map(|u| (u.kind, u.id.clone())).collect()
    };
    let page = store.units_after(0, 0, 2).unwrap();
    let segment_id = segment("u", &turns.iter().collect::<Vec<_>>()).segment.id.0;
    assert_eq!(
        kinds(&page),
        vec![
            (UnitKind::Turn, ids[0].0.clone()),
            (UnitKind::Turn, ids[1].0.clone()),
            (UnitKind::Segment, segment_id),
        ]
    );
    let last = page.iter().map(|u| (u.kind, u.seq));
    let turn_seq = last
        .clone()
        .filter(|u| u.0 == UnitKind::Turn)
        .map(|u| u.1)
        .max()
        .unwrap();
    let segment_seq = last
        .filter(|u| u.0 == UnitKind::Segment)
        .map(|u| u.1)
        .max()
        .unwrap();
    assert_eq!(
        kinds(&store.units_after(turn_seq, segment_seq, 2).unwrap()),
        vec![(UnitKind::Turn, ids[2].0.clone())]
    );
}

fn a_failing_batch_leaves_nothing_behind(place: &Place) {
    let mut store = place.open();
    // The segment links a turn that is neither stored nor in the batch: the batch must fail whole.
    let failed = store.commit(WriteBatch {
        turns: vec![turn("u", 2)],
        segments: vec![segment("u", &[&turn("u", 9)])],
        ..Default::default()
    });
    assert!(
        failed.is_err(),
        "a link to a missing turn must fail the batch"
    );
    assert!(
        store.turns(&[turn("u", 2).turn.id]).unwrap().is_empty(),
        "no partial batch"
    );
    assert_eq!(store.stats().unwrap().turns, 0);
}

fn delete_takes_one_scope_and_its_unshared_vectors(place: &Place) {
    let mut store = place.open();
    fill(&mut *store, "a");
    fill(&mut *store, "b");
    let report = store.delete(&ScopeFilter::user("a")).unwrap();
    assert_eq!(
        (report.turns, report.segments, report.embeddings),
        (3, 1, 4)
    );
    let stats = store.stats().unwrap();
    assert_eq!((stats.turns, stats.segments, stats.embeddings), (3, 1, 4));
    assert!(store.unit_vectors("m", "a", 0, 0).unwrap().is_empty());
    let held = store.unit_vectors("m", "b", 0, 0).unwrap();
    assert_eq!(held.len(), 4);
    // Asked for what lies past the first turn and the first segment, the rest of them come.
    let first = |kind: UnitKind| held.iter().find(|u| u.kind == kind).unwrap().seq;
    let past = store
        .unit_vectors("m", "b", first(UnitKind::Turn), first(UnitKind::Segment))
        .unwrap();
    assert_eq!(past.len(), held.len() - 2);
    assert!(past.iter().all(|u| held.contains(u)));
    // By store order, as a graph's candidates are rescored: the units asked for, whatever else
    // is asked (an order nobody holds, a deleted user's), under the model asked.
    let turns: Vec<&aril_store::UnitVectors> =
        held.iter().filter(|u| u.kind == UnitKind::Turn).collect();
    let mut at = store
        .unit_vectors_at(
            "m",
            UnitKind::Turn,
            &[turns[2].seq, turns[0].seq, 1_000_000, 1],
        )
        .unwrap();
    at.sort_by_key(|u| u.seq);
    assert_eq!(at, vec![turns[0].clone(), turns[2].clone()]);
    let seg = held.iter().find(|u| u.kind == UnitKind::Segment).unwrap();
    assert_eq!(
        store
            .unit_vectors_at("m", UnitKind::Segment, &[seg.seq])
            .unwrap(),
        vec![seg.clone()]
    );
    assert!(
        store
            .unit_vectors_at("other model", UnitKind::Turn, &[turns[0].seq])
            .unwrap()
            .is_empty()
    );
    store.check_integrity().unwrap();
    assert!(matches!(
        store.delete(&ScopeFilter::user("nobody")),
        Err(StoreError::UnknownScope(_))
    ));
}

fn open_segments_persist_per_conversation(place: &Place) {
    let scope = Scope::user("u").unwrap();
    {
        let mut store = place.open();
        let seg = aril_segment::Segmenter::default();
        let mut open = OpenSegment::default();
        let t = turn("u", 1);
        seg.push(
            &mut open,
            aril_segment::TurnInput {
                id: t.turn.id.clone(),
                session: None,
                vector: Some(vec![1.0, 0.0]),
                tokens: 5,
            },
        );
        store
            .commit(WriteBatch {
                turns: vec![t],
                open_segments: vec![aril_store::OpenSegmentRecord {
                    scope: scope.clone(),
                    conversation: "c".into(),
                    state: open.clone(),
                    read_version: 0,
                }],
                ..Default::default()
            })
            .unwrap();
        // A second writer that read the conversation before the first one committed loses:
        // nothing of its batch is written.
        let late = turn("u", 2);
        let err = store
            .commit(WriteBatch {
                turns: vec![late.clone()],
                open_segments: vec![aril_store::OpenSegmentRecord {
                    scope: scope.clone(),
                    conversation: "c".into(),
                    state: open,
                    read_version: 0,
                }],
                ..Default::default()
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err}");
        assert!(store.existing_turns(&[late.turn.id]).unwrap().is_empty());
    }
    let store = place.open();
    let read = store.open_segment(&scope, "c").unwrap();
    assert_eq!(read.state.turn_ids().len(), 1);
    assert_eq!(read.version, 1);
    let other = store.open_segment(&scope, "other").unwrap();
    assert!(other.state.is_empty());
    assert_eq!(other.version, 0);
    store.check_integrity().unwrap();
}

#[test]
fn sqlite_refuses_a_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    drop(conn);
    match SqliteStore::open(&path) {
        Err(StoreError::NewerSchema { found: 99, .. }) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a newer schema was opened"),
    }
}

fn integrity_check_catches_a_turn_outside_the_segmentation(place: &Place) {
    let mut store = place.open();
    store
        .commit(WriteBatch {
            turns: vec![turn("u", 1)],
            ..Default::default()
        })
        .unwrap();
    let err = store.check_integrity().unwrap_err().to_string();
    assert!(err.contains("1 turns, but 0 in closed segments"), "{err}");
}

/// Commits `turn` as version `version` of the memory `memory` (outside any segment).
fn revise(store: &mut dyn Store, memory: &TurnRecord, turn: TurnRecord, version: u32) {
    store
        .commit(WriteBatch {
            revisions: vec![RevisionRecord {
                memory: memory.turn.id.clone(),
                version,
                turn: turn.turn.id.clone(),
            }],
            embeddings: vec![embedding(&turn.text_hash)],
            turns: vec![turn],
            ..Default::default()
        })
        .unwrap();
}

fn later_versions_supersede_earlier_ones_and_keep_the_memory_id(place: &Place) {
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    let (v2, v3) = (turn("u", 20), turn("u", 30));
    revise(&mut *store, &turns[0], v2.clone(), 2);
    revise(&mut *store, &turns[0], v3.clone(), 3);
    let memory = &turns[0].turn.id;
    assert_eq!(
        store.memory_versions(memory).unwrap(),
        vec![memory.clone(), v2.turn.id.clone(), v3.turn.id.clone()]
    );
    // A later version is not a memory id of its own; an unknown id has no versions.
    assert!(store.memory_versions(&v2.turn.id).unwrap().is_empty());
    assert!(
        store
            .memory_versions(&TurnId("t_nope".into()))
            .unwrap()
            .is_empty()
    );
    let ids = store
        .memory_ids(&[v3.turn.id.clone(), turns[1].turn.id.clone()])
        .unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(ids[&v3.turn.id], *memory);
    let superseded = store.superseded("u").unwrap();
    assert_eq!(superseded.len(), 2);
    assert!(superseded.contains(memory) && superseded.contains(&v2.turn.id));
    assert!(store.superseded("someone else").unwrap().is_empty());
    let (current, total) = store
        .list_turn_ids(&ScopeFilter::user("u"), 0, 10, true)
        .unwrap();
    assert_eq!(total, 3);
    assert!(current.contains(&v3.turn.id) && !current.contains(memory));
    let (all, total) = store
        .list_turn_ids(&ScopeFilter::user("u"), 0, 10, false)
        .unwrap();
    assert_eq!((all.len(), total), (5, 5));
    // A version number is used once per memory.
    let again = store.commit(WriteBatch {
        turns: vec![turn("u", 40)],
        revisions: vec![RevisionRecord {
            memory: memory.clone(),
            version: 3,
            turn: turn("u", 40).turn.id,
        }],
        ..Default::default()
    });
    assert!(again.is_err());
    assert!(store.turns(&[turn("u", 40).turn.id]).unwrap().is_empty());
}

fn deleting_turns_swaps_their_segment_for_its_replacement_and_drops_their_vectors(place: &Place) {
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    let v2 = turn("u", 20);
    revise(&mut *store, &turns[0], v2.clone(), 2);
    let holding = store.segments_holding(&[turns[0].turn.id.clone()]).unwrap();
    assert_eq!(holding.len(), 1);
    let replacement = segment("u", &[&turns[1], &turns[2]]);
    let mut replacement = replacement;
    replacement.text_hash = "seg-u-rebuilt".into();
    let report = store
        .delete_turns(TurnDeletion {
            turns: vec![turns[0].turn.id.clone(), v2.turn.id.clone()],
            segments: vec![holding[0].id.clone()],
            replacements: vec![replacement.clone()],
            embeddings: vec![embedding("seg-u-rebuilt")],
            open_segments: vec![],
        })
        .unwrap();
    assert_eq!(
        (report.turns, report.segments, report.embeddings),
        (2, 1, 3),
        "two turns, the old segment, and the vectors of both turns and the old segment"
    );
    assert!(store.memory_versions(&turns[0].turn.id).unwrap().is_empty());
    assert!(store.superseded("u").unwrap().is_empty());
    let (segments, total) = store
        .list_segments(&ScopeFilter::user("u"), 0, u64::MAX)
        .unwrap();
    assert_eq!((segments.len(), total), (1, 1));
    assert_eq!(segments[0].turns, replacement.segment.turns);
    let hashes: Vec<String> = ["h-u-1", "h-u-20", "seg-u", "seg-u-rebuilt", "h-u-2"]
        .map(String::from)
        .to_vec();
    let mut cached: Vec<String> = store
        .embeddings("m", &hashes)
        .unwrap()
        .into_keys()
        .collect();
    cached.sort();
    assert_eq!(cached, vec!["h-u-2".to_string(), "seg-u-rebuilt".into()]);
}

/// The segment's one card (`c_1`, from its first turn), with an empty state and no vectors.
fn first_card_batch(seg: &SegmentRecord, turns: &[TurnRecord]) -> aril_store::CardBatch {
    aril_store::CardBatch {
        segment: seg.segment.id.clone(),
        cards: vec![card_of(seg, 1, &turns[0], &[])],
        scope: seg.segment.scope.clone(),
        conversation: "c".into(),
        state: serde_json::json!({}),
        vectors: vec![],
    }
}

fn card_of(
    segment: &SegmentRecord,
    n: usize,
    turn: &TurnRecord,
    supersedes: &[&str],
) -> aril_core::Card {
    aril_core::Card {
        id: aril_core::CardId(format!("c_{n}")),
        scope: segment.segment.scope.clone(),
        kind: aril_core::CardKind::Event,
        text: format!("card {n}: Caroline went to the support group"),
        entities: vec!["Caroline".into(), "Support Group".into()],
        topics: vec!["LGBTQ".into()],
        time: Some(aril_core::CardTime {
            start: Some(chrono::TimeZone::with_ymd_and_hms(&Utc, 2023, 5, 7, 0, 0, 0).unwrap()),
            end: None,
            granularity: "day".into(),
        }),
        source_turns: vec![turn.turn.id.clone()],
        segment: segment.segment.id.clone(),
        supersedes: supersedes
            .iter()
            .map(|s| aril_core::CardId(s.to_string()))
            .collect(),
        valid_from: Some(chrono::TimeZone::with_ymd_and_hms(&Utc, 2023, 5, 8, 10, 0, 0).unwrap()),
        valid_to: None,
    }
}

fn closed_segments_queue_for_cards_and_cards_are_found_by_every_structured_index(place: &Place) {
    use aril_store::{CardBatch, CardLookup, CardVectors, StoredChunk};
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    let seg = segment("u", &turns.iter().collect::<Vec<_>>());
    assert_eq!(
        store.queued_segments(10, false).unwrap(),
        vec![seg.segment.id.clone()]
    );
    assert_eq!(store.stats().unwrap().segments_pending, 1);
    let batch = |cards| CardBatch {
        segment: seg.segment.id.clone(),
        cards,
        scope: seg.segment.scope.clone(),
        conversation: "c".into(),
        state: serde_json::json!({"aliases": [["Mel", "Melanie"]]}),
        vectors: vec![CardVectors {
            card: aril_core::CardId("c_1".into()),
            model: "m".into(),
            chunks: vec![StoredChunk {
                start: 0,
                end: 4,
                vector: vec![0.6, 0.8],
            }],
        }],
    };
    store
        .commit_cards(batch(vec![
            card_of(&seg, 1, &turns[0], &[]),
            card_of(&seg, 2, &turns[1], &["c_1"]),
        ]))
        .unwrap();
    assert!(store.queued_segments(10, true).unwrap().is_empty());
    let stats = store.stats().unwrap();
    assert_eq!((stats.cards, stats.segments_pending), (2, 0));
    let all = store.cards(&ScopeFilter::user("u"), false).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(
        all[1],
        card_of(&seg, 2, &turns[1], &["c_1"]),
        "a card reads back as written"
    );
    let current = store.cards(&ScopeFilter::user("u"), true).unwrap();
    assert_eq!(
        current.iter().map(|c| c.id.0.as_str()).collect::<Vec<_>>(),
        ["c_2"]
    );
    let f = ScopeFilter::user("u");
    let day = |d| chrono::TimeZone::with_ymd_and_hms(&Utc, 2023, 5, d, 12, 0, 0).unwrap();
    for (lookup, hits) in [
        (CardLookup::Entity("caroline".into()), 2),
        (CardLookup::Topic("lgbtq".into()), 2),
        (
            CardLookup::EntityTopic("support group".into(), "LGBTQ".into()),
            2,
        ),
        (CardLookup::EntityTopic("melanie".into(), "LGBTQ".into()), 0),
        (CardLookup::During(day(6), day(7)), 2),
        (CardLookup::During(day(8), day(9)), 0),
        (CardLookup::Segment(seg.segment.id.clone()), 2),
    ] {
        assert_eq!(
            store.lookup_cards(&f, &lookup).unwrap().len(),
            hits,
            "{lookup:?}"
        );
    }
    assert!(
        store
            .lookup_cards(
                &ScopeFilter::user("other"),
                &CardLookup::Entity("caroline".into())
            )
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .encoder_state(&Scope::user("u").unwrap(), "c")
            .unwrap(),
        Some(serde_json::json!({"aliases": [["Mel", "Melanie"]]}))
    );
    let ids = [
        aril_core::CardId("c_1".into()),
        aril_core::CardId("c_2".into()),
    ];
    let vectors = store.card_vectors("m", &ids).unwrap();
    assert_eq!(vectors.len(), 1, "only c_1 was given a vector");
    assert_eq!(vectors[&ids[0]][0].vector, vec![0.6, 0.8]);
    assert!(store.card_vectors("other-model", &ids).unwrap().is_empty());
    // A backfill stores vectors of existing cards and skips unknown ones.
    let late = |card: &str| CardVectors {
        card: aril_core::CardId(card.into()),
        model: "m".into(),
        chunks: vec![StoredChunk {
            start: 0,
            end: 1,
            vector: vec![1.0, 0.0],
        }],
    };
    store
        .put_card_vectors(&[late("c_2"), late("nope")])
        .unwrap();
    assert_eq!(store.card_vectors("m", &ids).unwrap().len(), 2);
    // A card forgotten from a past time is no longer current; one forgotten from a later time
    // still is. Both read back as written.
    let mut forgotten = card_of(&seg, 3, &turns[1], &["c_2"]);
    forgotten.valid_to =
        Some(chrono::TimeZone::with_ymd_and_hms(&Utc, 2024, 1, 1, 0, 0, 0).unwrap());
    let mut ending = card_of(&seg, 4, &turns[2], &[]);
    ending.valid_to = Some((Utc::now() + chrono::Duration::days(1)).trunc_subsecs(6));
    store
        .append_cards(&[forgotten.clone(), ending.clone()], &[])
        .unwrap();
    let current = store.cards(&ScopeFilter::user("u"), true).unwrap();
    assert_eq!(current, [ending]);
    let all = store.cards(&ScopeFilter::user("u"), false).unwrap();
    assert_eq!(all[2], forgotten);
    store.check_integrity().unwrap();
    // Deleting the scope takes the cards, their vectors, index rows and the encoder state.
    store.delete(&ScopeFilter::user("u")).unwrap();
    assert_eq!(store.stats().unwrap().cards, 0);
    assert!(store.card_vectors("m", &ids).unwrap().is_empty());
    assert!(
        store
            .encoder_state(&Scope::user("u").unwrap(), "c")
            .unwrap()
            .is_none()
    );
}

fn a_failed_segment_waits_for_a_retry_and_a_deleted_one_cannot_take_cards(place: &Place) {
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    let seg = segment("u", &turns.iter().collect::<Vec<_>>());
    store
        .mark_failed(&seg.segment.id, "the reply was empty")
        .unwrap();
    assert!(store.queued_segments(10, false).unwrap().is_empty());
    assert_eq!(store.queued_segments(10, true).unwrap().len(), 1);
    assert_eq!(store.stats().unwrap().segments_failed, 1);
    store.delete(&ScopeFilter::user("u")).unwrap();
    let late = store.commit_cards(first_card_batch(&seg, &turns));
    assert!(
        late.is_err(),
        "cards of a deleted segment must not be stored"
    );
    assert_eq!(store.stats().unwrap().cards, 0);
}

fn claims_are_exclusive_and_end_with_cards_a_failure_or_a_release(place: &Place) {
    use std::time::Duration;
    let mut a = place.open();
    let mut b = place.open();
    let turns_u = fill(&mut *a, "u");
    let turns_v = fill(&mut *a, "v");
    let seg_u = segment("u", &turns_u.iter().collect::<Vec<_>>());
    let seg_v = segment("v", &turns_v.iter().collect::<Vec<_>>());
    let minute = Duration::from_secs(60);
    // One claimer takes the oldest; another, on its own connection, gets the next, then nothing.
    assert_eq!(
        a.claim(None, 1, false, minute).unwrap(),
        vec![seg_u.segment.id.clone()]
    );
    assert_eq!(
        b.claim(None, 5, false, minute).unwrap(),
        vec![seg_v.segment.id.clone()]
    );
    assert!(a.claim(None, 5, false, minute).unwrap().is_empty());
    // Claiming by id takes only what is free.
    let both = [seg_u.segment.id.clone(), seg_v.segment.id.clone()];
    assert!(b.claim(Some(&both), 5, false, minute).unwrap().is_empty());
    // A release hands the segment to anyone again.
    b.release(&seg_v.segment.id).unwrap();
    assert_eq!(
        a.claim(Some(&both), 5, false, minute).unwrap(),
        vec![seg_v.segment.id.clone()]
    );
    // Cards end the claim for good; a second writer of the same segment's cards is refused.
    b.commit_cards(first_card_batch(&seg_u, &turns_u)).unwrap();
    let again = a
        .commit_cards(first_card_batch(&seg_u, &turns_u))
        .unwrap_err();
    assert!(matches!(again, StoreError::Conflict(_)), "{again}");
    assert_eq!(a.stats().unwrap().cards, 1);
    // A failure ends it too; retrying claims failed segments.
    a.mark_failed(&seg_v.segment.id, "unusable reply").unwrap();
    assert!(b.claim(None, 5, false, minute).unwrap().is_empty());
    assert_eq!(
        b.claim(None, 5, true, minute).unwrap(),
        vec![seg_v.segment.id.clone()]
    );
    // A lease that ran out frees the segment without a release.
    b.release(&seg_v.segment.id).unwrap();
    assert_eq!(a.claim(None, 5, true, Duration::ZERO).unwrap().len(), 1);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(b.claim(None, 5, true, minute).unwrap().len(), 1);
}

fn a_store_that_searches_itself_finds_by_vector_and_by_word_and_forgets_deleted_units(
    place: &Place,
) {
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    fill(&mut *store, "v");
    let Some(search) = place.searcher() else {
        // The embedded store has no search of its own: the engine indexes beside it.
        assert!(matches!(place, Place::Sqlite(_)));
        return;
    };
    let u = ScopeFilter::user("u");
    // Every unit of the fixture has the vector [1, 0] under model "m".
    let dense = search
        .dense("m", &u, &[1.0, 0.0], 10, aril_core::UnitKind::Turn)
        .unwrap();
    assert_eq!(dense.len(), 3, "{dense:?}");
    assert!(dense.iter().all(|h| (h.score - 1.0).abs() < 1e-5));
    assert!(
        search
            .dense(
                "other-model",
                &u,
                &[1.0, 0.0],
                10,
                aril_core::UnitKind::Turn
            )
            .unwrap()
            .is_empty()
    );
    let segments = search
        .dense("m", &u, &[1.0, 0.0], 10, aril_core::UnitKind::Segment)
        .unwrap();
    assert_eq!(segments.len(), 1);
    // BM25: the turn with the rare word first; words of another user's turns are not found.
    let lexical = search
        .lexical(
            &u,
            "what was number 2 about",
            10,
            aril_core::UnitKind::Turn,
            None,
        )
        .unwrap();
    assert_eq!(
        lexical.first().map(|h| h.unit.as_str()),
        Some(turns[1].turn.id.0.as_str())
    );
    assert!(
        search
            .lexical(&u, "unheard-of words", 10, aril_core::UnitKind::Turn, None)
            .unwrap()
            .is_empty()
    );
    let segment_hits = search
        .lexical(&u, "number", 10, aril_core::UnitKind::Segment, None)
        .unwrap();
    assert_eq!(segment_hits.len(), 1);
    store.delete(&u).unwrap();
    assert!(
        search
            .dense("m", &u, &[1.0, 0.0], 10, aril_core::UnitKind::Turn)
            .unwrap()
            .is_empty()
    );
    assert!(
        search
            .lexical(&u, "number", 10, aril_core::UnitKind::Turn, None)
            .unwrap()
            .is_empty()
    );
    let v = ScopeFilter::user("v");
    assert_eq!(
        search
            .dense("m", &v, &[1.0, 0.0], 10, aril_core::UnitKind::Turn)
            .unwrap()
            .len(),
        3
    );
}

fn call(purpose: &str, prompt: u64, local: bool) -> aril_store::LlmCall {
    aril_store::LlmCall {
        at: Utc::now(),
        purpose: purpose.into(),
        model: "smol".into(),
        prompt_tokens: prompt,
        completion_tokens: 10,
        counted_locally: local,
        prompt_o200k: prompt / 2,
        completion_o200k: 8,
        latency_ms: 5,
        attempts: 1,
    }
}

fn llm_calls_are_summed_by_purpose_and_model_and_survive_reopen(place: &Place) {
    {
        let mut store = place.open();
        store
            .record_llm_calls(&[call("encode", 100, false), call("encode", 50, true)])
            .unwrap();
        store.record_llm_calls(&[call("plan", 7, false)]).unwrap();
    }
    let usage = place.open().llm_usage().unwrap();
    assert_eq!(usage.len(), 2);
    assert_eq!(usage[0].purpose, "encode");
    assert_eq!(
        (
            usage[0].calls,
            usage[0].prompt_tokens,
            usage[0].completion_tokens
        ),
        (2, 150, 20)
    );
    assert_eq!(usage[0].counted_locally, 1);
    assert_eq!(
        (
            usage[0].prompt_o200k,
            usage[0].completion_o200k,
            usage[0].o200k_calls
        ),
        (75, 16, 2)
    );
    assert_eq!(
        (usage[1].purpose.as_str(), usage[1].prompt_tokens),
        ("plan", 7)
    );
}

fn appended_cards_supersede_and_deleted_cards_leave_their_turns(place: &Place) {
    use aril_core::CardId;
    use aril_store::CardVectors;
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    let seg = segment("u", &turns.iter().collect::<Vec<_>>());
    store.commit_cards(first_card_batch(&seg, &turns)).unwrap();
    let edit = aril_core::Card {
        id: CardId("c_edit".into()),
        text: "Caroline went to the support group twice".into(),
        ..card_of(&seg, 1, &turns[0], &["c_1"])
    };
    let vector = CardVectors {
        card: edit.id.clone(),
        model: "m".into(),
        chunks: vec![StoredChunk {
            start: 0,
            end: 3,
            vector: vec![0.0, 1.0],
        }],
    };
    store
        .append_cards(std::slice::from_ref(&edit), &[vector])
        .unwrap();
    assert_eq!(
        store.cards_superseding(&CardId("c_1".into())).unwrap(),
        vec![edit.id.clone()]
    );
    let current = store.cards(&ScopeFilter::user("u"), true).unwrap();
    assert_eq!(current, vec![edit.clone()], "the edit holds now");
    assert_eq!(
        store
            .card_vectors("m", std::slice::from_ref(&edit.id))
            .unwrap()
            .len(),
        1
    );
    let removed = store
        .delete_cards(&[CardId("c_1".into()), edit.id.clone(), CardId("nope".into())])
        .unwrap();
    assert_eq!(removed, 2);
    assert!(
        store
            .cards(&ScopeFilter::user("u"), false)
            .unwrap()
            .is_empty()
    );
    assert!(store.card_vectors("m", &[edit.id]).unwrap().is_empty());
    assert_eq!(store.stats().unwrap().turns, 3, "the turns stay");
    store.check_integrity().unwrap();
}

fn api_keys_are_kept_with_their_grant(place: &Place) {
    use aril_store::ApiKeyRecord;
    let created = chrono::TimeZone::with_ymd_and_hms(&Utc, 2024, 1, 2, 3, 4, 5).unwrap();
    let key = |id: &str, user: Option<&str>| ApiKeyRecord {
        id: id.into(),
        key_hash: format!("hash-{id}"),
        user_id: user.map(str::to_string),
        admin: user.is_none(),
        created,
    };
    {
        let mut store = place.open();
        store.add_api_key(&key("k1", Some("alice"))).unwrap();
        store.add_api_key(&key("k2", None)).unwrap();
        assert!(
            store.add_api_key(&key("k1", Some("bob"))).is_err(),
            "an id is used once"
        );
    }
    let mut keys = place.open().api_keys().unwrap();
    keys.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(keys, vec![key("k1", Some("alice")), key("k2", None)]);
}

#[test]
fn sqlite_upgrades_a_version_4_file_and_keeps_its_calls() {
    let place = Place::sqlite();
    let Place::Sqlite(dir) = &place else {
        unreachable!()
    };
    let path = dir.path().join("s.sqlite");
    place
        .open()
        .record_llm_calls(&[call("encode", 100, false), call("encode", 50, true)])
        .unwrap();
    // A version-4 file (calls without o200k counts) is upgraded in place: its calls are kept and
    // counted as calls without o200k figures.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "ALTER TABLE llm_calls DROP COLUMN prompt_o200k;
         ALTER TABLE llm_calls DROP COLUMN completion_o200k;
         ALTER TABLE open_segments DROP COLUMN version;
         ALTER TABLE consolidation DROP COLUMN claimed_until;
         UPDATE meta SET value = '4' WHERE key = 'schema_version';",
    )
    .unwrap();
    drop(conn);
    let mut store = SqliteStore::open(&path).unwrap();
    store.record_llm_calls(&[call("plan", 9, false)]).unwrap();
    let usage = store.llm_usage().unwrap();
    assert_eq!(usage[0].calls, 2);
    assert_eq!(usage[0].o200k_calls, 0);
    assert_eq!(
        (usage[1].calls, usage[1].o200k_calls, usage[1].prompt_o200k),
        (1, 1, 4)
    );
    // The columns of version 6 are there too.
    let scope = Scope::user("u").unwrap();
    assert_eq!(store.open_segment(&scope, "c").unwrap().version, 0);
    assert!(
        store
            .claim(None, 1, false, std::time::Duration::from_secs(1))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn postgres_refuses_a_database_not_migrated_or_newer_and_migrating_twice_is_harmless() {
    let db = ScratchDatabase::new().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        PgStore::migrate(db.url()).unwrap(),
        aril_store::PG_SCHEMA_VERSION
    );
    let mut admin = ::postgres::Client::connect(db.url(), ::postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "INSERT INTO aril_schema_history (version, name, applied_on, checksum) \
             VALUES (99, 'from_the_future', '2030-01-01', '0')",
        )
        .unwrap();
    match PgStore::open(db.url()) {
        Err(StoreError::NewerDatabase { found: 99, .. }) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a newer schema was opened"),
    }
    admin
        .batch_execute("DROP TABLE aril_schema_history")
        .unwrap();
    match PgStore::open(db.url()) {
        Err(e @ StoreError::NotMigrated { found: 0, .. }) => {
            assert!(e.to_string().contains("migrate"), "{e}")
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a database without the schema was opened"),
    }
}

/// A database an aril of schema 1 filled (no search rows) becomes searchable by `migrate`: the
/// backfill renders texts, decodes cached vectors into chunk rows and windows each turn.
#[test]
fn postgres_migrating_schema_1_indexes_what_it_holds() {
    let db = ScratchDatabase::at_version(1).unwrap_or_else(|e| panic!("{e}"));
    let mut client = ::postgres::Client::connect(db.url(), ::postgres::NoTls).unwrap();
    let chunks = aril_store::scratch::encode_chunks(&[StoredChunk {
        start: 0,
        end: 5,
        vector: vec![0.6, 0.8],
    }]);
    client
        .batch_execute(
            "INSERT INTO turns (id, user_id, conversation, role, speaker, text, text_hash, \
             ingest_time) VALUES \
             ('t1', 'u', 'c', 'user', 'Ana', 'My bicycle is red', 'h1', now()), \
             ('t2', 'u', 'c', 'user', 'Ana', 'The train was late again', 'h2', now()); \
             INSERT INTO segments (id, user_id, conversation, boundary_score, reason, tokens, \
             text_hash) VALUES ('s1', 'u', 'c', 0.7, 'flushed', 12, 'hs'); \
             INSERT INTO segment_turns VALUES ('s1', 0, 't1'), ('s1', 1, 't2');",
        )
        .unwrap();
    for hash in ["h1", "h2", "hs"] {
        client
            .execute(
                "INSERT INTO embeddings (model, text_hash, pieces, chunks) VALUES ('m', $1, 5, $2)",
                &[&hash, &chunks],
            )
            .unwrap();
    }
    assert!(matches!(
        PgStore::open(db.url()),
        Err(StoreError::NotMigrated { found: 1, .. })
    ));
    assert_eq!(
        PgStore::migrate(db.url()).unwrap(),
        aril_store::PG_SCHEMA_VERSION
    );
    let store = PgStore::open(db.url()).unwrap();
    let search = store.searcher();
    let u = ScopeFilter::user("u");
    let words = search
        .lexical(&u, "bicycle", 5, aril_core::UnitKind::Turn, None)
        .unwrap();
    assert_eq!(
        words.iter().map(|h| h.unit.as_str()).collect::<Vec<_>>(),
        vec!["t1"]
    );
    let segment = search
        .lexical(&u, "train", 5, aril_core::UnitKind::Segment, None)
        .unwrap();
    assert_eq!(segment.len(), 1);
    // Each turn's window holds its neighbour: "bicycle" is found through both windows.
    let mut windows: Vec<String> = search
        .lexical(&u, "bicycle", 5, aril_core::UnitKind::Window, None)
        .unwrap()
        .into_iter()
        .map(|h| h.unit.as_str().to_string())
        .collect();
    windows.sort();
    assert_eq!(windows, ["t1", "t2"]);
    let near = search
        .dense("m", &u, &[0.6, 0.8], 5, aril_core::UnitKind::Turn)
        .unwrap();
    assert_eq!(near.len(), 2);
    assert!((near[0].score - 1.0).abs() < 1e-5);
    assert_eq!(
        search
            .dense("m", &u, &[0.6, 0.8], 5, aril_core::UnitKind::Segment)
            .unwrap()
            .len(),
        1
    );
    store.check_integrity().unwrap();
}

fn a_role_restricted_word_search_returns_those_roles_turns_scored_as_among_all(place: &Place) {
    let mut store = place.open();
    let said = |role, n: usize, text: &str| {
        let mut t = turn("w", n);
        t.turn.turn.role = role;
        t.turn.turn.text = text.into();
        t.turn.id = t.turn.turn.id();
        t.text_hash = format!("h-w-{n}");
        t
    };
    let turns = vec![
        said(Role::User, 1, "the zebra by the lake"),
        said(Role::Assistant, 2, "zebra zebra zebra facts"),
        said(Role::User, 3, "a mountain walk"),
    ];
    store
        .commit(WriteBatch {
            turns: turns.clone(),
            segments: vec![segment("w", &turns.iter().collect::<Vec<_>>())],
            ..Default::default()
        })
        .unwrap();
    let Some(search) = place.searcher() else {
        assert!(matches!(place, Place::Sqlite(_)));
        return;
    };
    let w = ScopeFilter::user("w");
    let find = |kind, roles: Option<&[Role]>| -> Vec<(String, f32)> {
        search
            .lexical(&w, "zebra", 10, kind, roles)
            .unwrap()
            .into_iter()
            .map(|h| (h.unit.as_str().to_string(), h.score))
            .collect()
    };
    let every = find(aril_core::UnitKind::Turn, None);
    assert_eq!(every.len(), 2, "{every:?}");
    assert_eq!(every[0].0, turns[1].turn.id.0, "the wordier reply leads");
    // Kept to the user's turns, the reply is gone, and the user's turn scores as it did among
    // every turn (the statistics still count the reply).
    let users = find(aril_core::UnitKind::Turn, Some(&[Role::User]));
    assert_eq!(users, vec![every[1].clone()]);
    let windows = find(aril_core::UnitKind::Window, Some(&[Role::Assistant]));
    assert_eq!(
        windows.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(),
        vec![turns[1].turn.id.0.as_str()]
    );
    // Segments have no role: a role restriction finds none of them.
    assert_eq!(find(aril_core::UnitKind::Segment, None).len(), 1);
    assert!(find(aril_core::UnitKind::Segment, Some(&[Role::User])).is_empty());
}

/// Rows where the BM25 counters and a recount of the postings disagree, and the postings count:
/// counted here independently of the store's own check.
fn statistics_disagreements(admin: &mut ::postgres::Client) -> (i64, i64) {
    // Every posting under the kinds it counts for: a word a turn shares with its window
    // (kind 4) is the turn's (0) and the window's (1).
    let postings = "(SELECT p.user_id, p.agent_id, p.run_id, k.kind, p.lexeme, p.unit_id, p.len \
                     FROM (SELECT * FROM turn_postings UNION ALL SELECT * FROM segment_postings \
                           UNION ALL SELECT * FROM card_postings) p \
                     CROSS JOIN LATERAL (SELECT p.kind WHERE p.kind <> 4 \
                          UNION ALL SELECT 0 WHERE p.kind = 4 \
                          UNION ALL SELECT 1 WHERE p.kind = 4) k (kind))";
    let terms: i64 = admin
        .query_one(
            &format!(
                "SELECT COUNT(*) FROM ( \
                   (SELECT user_id, agent_id, run_id, kind, lexeme, n FROM lexical_terms \
                    EXCEPT SELECT user_id, agent_id, run_id, kind, lexeme, COUNT(*) \
                    FROM {postings} p GROUP BY 1, 2, 3, 4, 5) \
                   UNION ALL \
                   (SELECT user_id, agent_id, run_id, kind, lexeme, COUNT(*) FROM {postings} p \
                    GROUP BY 1, 2, 3, 4, 5 EXCEPT \
                    SELECT user_id, agent_id, run_id, kind, lexeme, n FROM lexical_terms)) d"
            ),
            &[],
        )
        .unwrap()
        .get(0);
    let recount = format!(
        "SELECT user_id, agent_id, run_id, kind, COUNT(*)::BIGINT, SUM(len)::BIGINT FROM \
         (SELECT DISTINCT user_id, agent_id, run_id, kind, unit_id, len FROM {postings} p) u \
         GROUP BY 1, 2, 3, 4"
    );
    let totals: i64 = admin
        .query_one(
            &format!(
                "SELECT COUNT(*) FROM ( \
                   (SELECT user_id, agent_id, run_id, kind, units, length FROM lexical_totals \
                    EXCEPT {recount}) UNION ALL ({recount} EXCEPT \
                    SELECT user_id, agent_id, run_id, kind, units, length FROM lexical_totals)) d"
            ),
            &[],
        )
        .unwrap()
        .get(0);
    let count: i64 = admin
        .query_one(&format!("SELECT COUNT(*) FROM {postings} p"), &[])
        .unwrap()
        .get(0);
    (terms + totals, count)
}

/// The word statistics PostgreSQL's triggers keep equal what its postings hold after every
/// kind of write (turns, windows, segments, a revision, a single-turn deletion with its
/// replacement segment), and a deleted user leaves no word, count or posting behind.
#[test]
fn postgres_word_statistics_follow_every_write_and_deletion() {
    let place = Place::postgres();
    let mut admin = place.admin();
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    fill(&mut *store, "v");
    // A turn alone in its conversation: its window holds its words only.
    let mut alone = turn("u", 30);
    alone.turn.turn.conversation = "alone".into();
    alone.turn.id = alone.turn.turn.id();
    store
        .commit(WriteBatch {
            turns: vec![alone.clone()],
            segments: vec![],
            open_segments: vec![],
            embeddings: vec![embedding(&alone.text_hash)],
            revisions: vec![],
        })
        .unwrap();
    let shared: i64 = admin
        .query_one(
            "SELECT COUNT(*) FROM turn_postings WHERE unit_id = $1 AND kind = 4",
            &[&alone.turn.id.0],
        )
        .unwrap()
        .get(0);
    assert!(
        shared > 0,
        "a turn alone shares its postings with its window"
    );
    let (wrong, postings) = statistics_disagreements(&mut admin);
    assert_eq!(wrong, 0);
    assert!(postings > 0);
    let v2 = turn("u", 20);
    revise(&mut *store, &turns[0], v2.clone(), 2);
    let holding = store.segments_holding(&[turns[0].turn.id.clone()]).unwrap();
    let mut replacement = segment("u", &[&turns[1], &turns[2]]);
    replacement.text_hash = "seg-u-rebuilt".into();
    store
        .delete_turns(TurnDeletion {
            turns: vec![turns[0].turn.id.clone(), v2.turn.id.clone()],
            segments: vec![holding[0].id.clone()],
            replacements: vec![replacement],
            embeddings: vec![embedding("seg-u-rebuilt")],
            open_segments: vec![],
        })
        .unwrap();
    assert_eq!(statistics_disagreements(&mut admin).0, 0);
    store.delete(&ScopeFilter::user("u")).unwrap();
    assert_eq!(statistics_disagreements(&mut admin).0, 0);
    for table in [
        "lexical_terms",
        "lexical_totals",
        "turn_postings",
        "segment_postings",
    ] {
        let left: i64 = admin
            .query_one(
                &format!("SELECT COUNT(*) FROM {table} WHERE user_id = 'u'"),
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(left, 0, "{table} keeps rows of a deleted user");
    }
    let kept: i64 = admin
        .query_one(
            "SELECT COUNT(*) FROM lexical_terms WHERE user_id = 'v'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(kept > 0, "another user's words are kept");
}

/// BM25 statistics that disagree with the postings (a trigger bypassed: a partial restore, a
/// hand edit) are found by the check `aril check` runs, and counted again by the rebuild
/// `aril reindex` runs.
#[test]
fn postgres_statistics_that_disagree_with_the_postings_are_found_and_recounted() {
    let place = Place::postgres();
    let mut admin = place.admin();
    let mut store = place.open();
    fill(&mut *store, "u");
    fill(&mut *store, "v");
    let search = place
        .searcher()
        .expect("a PostgreSQL store searches itself");
    assert_eq!(search.statistics_mismatches().unwrap(), (0, 0));
    let raised = admin
        .execute(
            "UPDATE lexical_terms SET n = n + 1 WHERE user_id = 'u' AND lexeme IN \
             (SELECT lexeme FROM lexical_terms WHERE user_id = 'u' ORDER BY lexeme LIMIT 2)",
            &[],
        )
        .unwrap() as i64;
    let invented = admin
        .execute(
            "INSERT INTO lexical_terms (user_id, agent_id, run_id, kind, lexeme, n) \
             VALUES ('ghost', '', '', 0, 'boo', 3)",
            &[],
        )
        .unwrap() as i64;
    let dropped = admin
        .execute("DELETE FROM lexical_totals WHERE user_id = 'v'", &[])
        .unwrap() as i64;
    assert!(raised > 0 && dropped > 0);
    assert_eq!(
        search.statistics_mismatches().unwrap(),
        (raised + invented, dropped)
    );
    // The independent count sees a changed row twice: as it is, and as it should be.
    assert_eq!(
        statistics_disagreements(&mut admin).0,
        2 * raised + invented + dropped
    );
    search.recount_statistics().unwrap();
    assert_eq!(search.statistics_mismatches().unwrap(), (0, 0));
    assert_eq!(statistics_disagreements(&mut admin).0, 0);
    let ghosts: i64 = admin
        .query_one(
            "SELECT COUNT(*) FROM lexical_terms WHERE user_id = 'ghost'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(ghosts, 0, "a count no posting backs is gone");
}

/// A database an aril of schema 3 indexed (words as `tsvector`s only) is searched by its
/// postings after `migrate`, with the statistics counted from them.
#[test]
fn postgres_migrating_schema_3_makes_postings_of_what_it_indexed() {
    let db = ScratchDatabase::at_version(3).unwrap_or_else(|e| panic!("{e}"));
    let mut client = ::postgres::Client::connect(db.url(), ::postgres::NoTls).unwrap();
    client
        .batch_execute(
            "INSERT INTO turns (id, user_id, conversation, role, speaker, text, text_hash, \
             ingest_time, tsv, wtsv) VALUES \
             ('t1', 'u', 'c', 'user', 'Ana', 'My bicycle is red', 'h1', now(), \
              to_tsvector('english', 'Ana: My bicycle is red'), \
              to_tsvector('english', 'Ana: My bicycle is red Ana: The train was late')), \
             ('t2', 'u', 'c', 'user', 'Ana', 'The train was late', 'h2', now(), \
              to_tsvector('english', 'Ana: The train was late'), \
              to_tsvector('english', 'Ana: My bicycle is red Ana: The train was late')), \
             ('t3', 'u', 'd', 'user', 'Ana', 'A long letter', 'h3', now(), \
              to_tsvector('english', 'Ana: A long letter'), \
              to_tsvector('english', 'Ana: A long letter'));",
        )
        .unwrap();
    assert_eq!(
        PgStore::migrate(db.url()).unwrap(),
        aril_store::PG_SCHEMA_VERSION
    );
    let store = PgStore::open(db.url()).unwrap();
    let search = store.searcher();
    let u = ScopeFilter::user("u");
    let hits = search
        .lexical(&u, "a red bicycle", 5, UnitKind::Turn, None)
        .unwrap();
    assert_eq!(
        hits.iter().map(|h| h.unit.as_str()).collect::<Vec<_>>(),
        vec!["t1"]
    );
    assert_eq!(
        search
            .lexical(&u, "late train", 5, UnitKind::Window, None)
            .unwrap()
            .len(),
        2
    );
    let (units, ana): (i64, i64) = {
        let r = client
            .query_one(
                "SELECT (SELECT units FROM lexical_totals WHERE user_id = 'u' AND kind = 0), \
                        (SELECT n FROM lexical_terms WHERE user_id = 'u' AND kind = 0 \
                         AND lexeme = 'ana')",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((units, ana), (3, 3));
    // A turn whose window holds its words only has one posting per word, serving both.
    let kinds: Vec<i16> = client
        .query(
            "SELECT DISTINCT kind FROM turn_postings WHERE unit_id = 't3'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(kinds, vec![4]);
    for kind in [UnitKind::Turn, UnitKind::Window] {
        let hits = search.lexical(&u, "letter", 5, kind, None).unwrap();
        assert_eq!(
            hits.iter().map(|h| h.unit.as_str()).collect::<Vec<_>>(),
            vec!["t3"],
            "{kind:?}"
        );
    }
}

/// A write transaction takes its user's advisory lock (the one the postings triggers count
/// under) before anything else: a commit for a user whose lock another session holds waits
/// for it in its first statement, and goes on once it is released.
#[test]
fn postgres_a_write_waits_for_its_users_lock_before_writing() {
    let place = Place::postgres();
    let mut holder = place.admin();
    let mut held = holder.transaction().unwrap();
    held.execute(
        "SELECT pg_advisory_xact_lock(1634888044, hashtext('u'))",
        &[],
    )
    .unwrap();
    let mut store = place.open();
    let writer = std::thread::spawn(move || fill(&mut *store, "u").len());
    let mut watcher = place.admin();
    // The waiting statement: the lock taken first, not a posting insert whose trigger waits.
    let waiting = (0..200).find_map(|_| {
        let row = watcher
            .query_opt(
                "SELECT query FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
                &[],
            )
            .unwrap();
        if row.is_none() {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        row.map(|r| r.get::<_, String>(0))
    });
    let waiting = waiting.unwrap_or_else(|| panic!("the commit did not wait for its user's lock"));
    assert!(
        waiting
            .trim_start()
            .starts_with("SELECT pg_advisory_xact_lock"),
        "the commit waited in {waiting}"
    );
    held.commit().unwrap();
    assert_eq!(writer.join().unwrap(), 3);
    let written: i64 = watcher
        .query_one("SELECT COUNT(*) FROM turns", &[])
        .unwrap()
        .get(0);
    assert_eq!(written, 3);
}

/// `current_turn_facts`: one row per current turn of the scope (no replaced version, no expired
/// memory), its metadata, its memory's first time as `created_at`, and its validity's end.
fn current_turn_facts_give_each_memorys_times_without_its_text(place: &Place) {
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    fill(&mut *store, "v");
    let said = chrono::TimeZone::with_ymd_and_hms(&Utc, 2024, 3, 1, 10, 0, 0).unwrap();
    let mut v2 = turn("u", 20);
    v2.turn.turn.event_time = Some(said + chrono::Duration::days(30));
    v2.turn.turn.lifecycle.valid_to = Some(said + chrono::Duration::days(60));
    revise(&mut *store, &turns[0], v2.clone(), 2);
    let mut gone = turn("u", 40);
    gone.turn.turn.lifecycle.expires_at = Some(Utc::now() - chrono::Duration::hours(1));
    store
        .commit(WriteBatch {
            embeddings: vec![embedding(&gone.text_hash)],
            turns: vec![gone],
            ..Default::default()
        })
        .unwrap();
    let facts = store
        .current_turn_facts(&ScopeFilter::user("u"), &Narrowing::ALL)
        .unwrap();
    let ids: Vec<&TurnId> = facts.iter().map(|f| &f.id).collect();
    assert_eq!(
        ids,
        [&turns[1].turn.id, &turns[2].turn.id, &v2.turn.id],
        "the current turns of u, in store order"
    );
    let first_said = turns[0].turn.ingest_time.trunc_subsecs(6);
    let revised = &facts[2];
    // To the microsecond: PostgreSQL keeps no finer.
    assert_eq!(
        revised.created_at.trunc_subsecs(6),
        first_said,
        "its memory's first time"
    );
    assert_eq!(
        revised.updated_at.trunc_subsecs(6),
        v2.turn.ingest_time.trunc_subsecs(6)
    );
    assert_eq!(revised.valid_to, v2.turn.turn.lifecycle.valid_to);
    assert_eq!(facts[0].metadata, Some(turn_metadata("u")));
    assert_eq!(facts[1].metadata, None);
}

/// `current_turn_facts` with a span of creation times: the current turns whose memory was first
/// said inside it, both ends included to the fraction of a second, whatever their own version
/// says; a bound on one end leaves the other open.
fn current_turn_facts_of_a_span_are_the_memories_first_said_inside_it(place: &Place) {
    let mut store = place.open();
    let day = |d: i64| {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2024, 3, 1, 10, 0, 0).unwrap()
            + chrono::Duration::days(d)
    };
    let said = |n: usize| match n {
        5 => Some(day(5) + chrono::Duration::milliseconds(500)),
        7 => None,
        n => Some(day(n as i64)),
    };
    let mut ids = Vec::new();
    for user in ["u", "v"] {
        let turns: Vec<TurnRecord> = (1..=7)
            .map(|n| {
                let mut t = turn(user, n);
                t.turn.turn.event_time = said(n);
                t
            })
            .collect();
        commit_turns(&mut *store, &turns);
        if user == "u" {
            ids = turns.iter().map(|t| t.turn.id.clone()).collect();
            // The memory said on day 2 takes a version said on day 20, and the one of day 6 a
            // version said on day 3: each keeps its first time.
            let mut v2 = turn("u", 20);
            v2.turn.turn.event_time = Some(day(20));
            revise(&mut *store, &turns[1], v2.clone(), 2);
            ids[1] = v2.turn.id;
            let mut v6 = turn("u", 60);
            v6.turn.turn.event_time = Some(day(3));
            revise(&mut *store, &turns[5], v6.clone(), 2);
            ids[5] = v6.turn.id;
        }
    }
    let facts = |from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>| -> Vec<TurnId> {
        let mut found: Vec<TurnId> = store
            .current_turn_facts(
                &ScopeFilter::user("u"),
                &Narrowing {
                    created: TimeSpan { from, to },
                    metadata_any_of: None,
                },
            )
            .unwrap()
            .into_iter()
            .map(|f| f.id)
            .collect();
        found.sort_by_key(|id| ids.iter().position(|i| i == id));
        found
    };
    let of = |ns: &[usize]| -> Vec<TurnId> { ns.iter().map(|n| ids[n - 1].clone()).collect() };
    let end = day(5) + chrono::Duration::milliseconds(500);
    assert_eq!(facts(Some(day(2)), Some(end)), of(&[2, 3, 4, 5]));
    assert_eq!(
        facts(Some(day(2)), Some(end - chrono::Duration::milliseconds(1))),
        of(&[2, 3, 4])
    );
    assert_eq!(
        facts(Some(day(2) + chrono::Duration::microseconds(1)), Some(end)),
        of(&[3, 4, 5])
    );
    // The turn said at no time counts from when it was stored (now).
    assert_eq!(facts(Some(day(6)), None), of(&[6, 7]));
    assert_eq!(facts(None, Some(day(1))), of(&[1]));
    assert_eq!(facts(Some(day(4)), Some(day(3))), of(&[]));
    assert_eq!(facts(None, None), of(&[1, 2, 3, 4, 5, 6, 7]));
}

/// Metadata of the largest size allowed goes through every index that holds it (SQLite's
/// `turns_facts` covers it) and reads back whole, through the facts and the turn.
fn metadata_as_large_as_allowed_is_stored_indexed_and_read_back(place: &Place) {
    let mut store = place.open();
    let room = aril_core::METADATA_MAX_BYTES - 32;
    let large = Metadata::try_from(serde_json::json!({"blob": "é".repeat(room / 2)})).unwrap();
    let mut big = turn("u", 7);
    big.turn.turn.metadata = Some(large.clone());
    commit_turns(&mut *store, std::slice::from_ref(&big));
    let facts = store
        .current_turn_facts(&ScopeFilter::user("u"), &Narrowing::ALL)
        .unwrap();
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0].metadata.as_ref(), Some(&large));
    let read = store.turns(std::slice::from_ref(&big.turn.id)).unwrap();
    assert_eq!(read[0].turn.metadata.as_ref(), Some(&large));
}

/// `current_turn_facts` narrowed by metadata objects: the turns whose metadata contains one of
/// them (JSON containment: a nested object's keys, a list's elements, numbers by value), and none
/// when the list is empty.
fn current_turn_facts_narrowed_by_metadata_are_those_containing_an_object(place: &Place) {
    let mut store = place.open();
    let tagged = [
        serde_json::json!({"kind": "keep", "tags": ["a", "b"], "n": 1}),
        serde_json::json!({"kind": "keep", "place": {"city": "Porto", "zip": "4000"}}),
        serde_json::json!({"kind": "noise", "n": 1.0}),
    ];
    let mut turns: Vec<TurnRecord> = (0..4).map(|n| turn("u", 50 + n)).collect();
    for (t, m) in turns.iter_mut().zip(&tagged) {
        t.turn.turn.metadata = Some(Metadata::try_from(m.clone()).unwrap());
    }
    turns[3].turn.turn.metadata = None;
    commit_turns(&mut *store, &turns);
    let found = |any_of: Vec<serde_json::Value>| -> Vec<TurnId> {
        store
            .current_turn_facts(
                &ScopeFilter::user("u"),
                &Narrowing {
                    created: TimeSpan::ALL,
                    metadata_any_of: Some(any_of),
                },
            )
            .unwrap()
            .into_iter()
            .map(|f| f.id)
            .collect()
    };
    let ids =
        |ns: &[usize]| -> Vec<TurnId> { ns.iter().map(|&n| turns[n].turn.id.clone()).collect() };
    use serde_json::json;
    assert_eq!(found(vec![json!({"kind": "keep"})]), ids(&[0, 1]));
    assert_eq!(
        found(vec![json!({"n": 1})]),
        ids(&[0, 2]),
        "numbers by value"
    );
    assert_eq!(found(vec![json!({"tags": ["b"]})]), ids(&[0]));
    assert_eq!(found(vec![json!({"place": {"city": "Porto"}})]), ids(&[1]));
    assert_eq!(
        found(vec![json!({"kind": "noise"}), json!({"tags": ["a"]})]),
        ids(&[0, 2])
    );
    assert_eq!(found(vec![json!({"kind": "other"})]), ids(&[]));
    assert_eq!(found(vec![]), ids(&[]));
}

fn utc(y: i32, m: u32, d: u32, h: u32) -> DateTime<Utc> {
    chrono::TimeZone::with_ymd_and_hms(&Utc, y, m, d, h, 0, 0).unwrap()
}

fn a_scopes_summary_counts_its_own_memory_only(place: &Place) {
    let mut store = place.open();
    let u = fill(&mut *store, "u");
    let v = fill(&mut *store, "v");
    let u_seg = segment("u", &u.iter().collect::<Vec<_>>());
    let v_seg = segment("v", &v.iter().collect::<Vec<_>>());
    let mut batch = first_card_batch(&u_seg, &u);
    batch.cards.push(card_of(&u_seg, 2, &u[1], &["c_1"]));
    store.commit_cards(batch).unwrap();
    store
        .mark_failed(&v_seg.segment.id, "the encoder failed")
        .unwrap();
    let w = turn("w", 1);
    commit_turns(&mut *store, std::slice::from_ref(&w));
    let w_seg = segment("w", &[&w]);
    store
        .commit(WriteBatch {
            segments: vec![w_seg],
            embeddings: vec![embedding("seg-w")],
            ..Default::default()
        })
        .unwrap();

    let of = |user: &str| store.scope_summary(&ScopeFilter::user(user)).unwrap();
    let text_bytes: u64 = u.iter().map(|t| t.turn.turn.text.len() as u64).sum::<u64>()
        + [1, 2]
            .iter()
            .map(|n| card_of(&u_seg, *n, &u[0], &[]).text.len() as u64)
            .sum::<u64>();
    let summary = of("u");
    assert_eq!(
        (summary.turns, summary.segments, summary.current_cards),
        (3, 1, 1),
        "the superseded card is not current"
    );
    assert_eq!((summary.segments_pending, summary.segments_failed), (0, 0));
    assert_eq!(summary.text_bytes, text_bytes, "turns' and cards' text");
    let last = summary.last_write.expect("a last write");
    assert!((last - u[2].turn.ingest_time).num_milliseconds().abs() < 1);
    let v = of("v");
    assert_eq!(
        (
            v.turns,
            v.current_cards,
            v.segments_pending,
            v.segments_failed
        ),
        (3, 0, 0, 1)
    );
    let w = of("w");
    assert_eq!((w.turns, w.segments_pending, w.segments_failed), (1, 1, 0));
    assert_eq!(of("nobody"), aril_store::ScopeSummary::default());
}

fn cards_are_found_a_page_at_a_time_by_kind_entity_topic_and_day(place: &Place) {
    use aril_core::CardKind;
    use aril_store::CardQuery;
    let mut store = place.open();
    let turns = fill(&mut *store, "u");
    fill(&mut *store, "v");
    let seg = segment("u", &turns.iter().collect::<Vec<_>>());
    let mut batch = first_card_batch(&seg, &turns);
    batch.cards.push(card_of(&seg, 2, &turns[1], &["c_1"]));
    let mut taste = card_of(&seg, 3, &turns[2], &[]);
    taste.kind = CardKind::Preference;
    taste.entities = vec!["Melanie".into()];
    taste.topics = vec!["Pottery".into()];
    taste.time = None;
    batch.cards.push(taste);
    store.commit_cards(batch).unwrap();

    let find = |query: CardQuery, offset: u64, limit: u64| {
        let (cards, total) = store
            .find_cards(&ScopeFilter::user("u"), &query, offset, limit)
            .unwrap();
        let ids: Vec<String> = cards.into_iter().map(|c| c.id.0).collect();
        (ids, total)
    };
    let current = CardQuery {
        current_only: true,
        ..Default::default()
    };
    let day = |d| chrono::NaiveDate::from_ymd_opt(2023, 5, d);
    for (query, offset, limit, expected, total) in [
        (current.clone(), 0, 10, vec!["c_2", "c_3"], 2),
        (CardQuery::default(), 0, 10, vec!["c_1", "c_2", "c_3"], 3),
        (CardQuery::default(), 1, 1, vec!["c_2"], 3),
        (CardQuery::default(), 5, 10, vec![], 3),
        (
            CardQuery {
                kind: Some(CardKind::Event),
                ..current.clone()
            },
            0,
            10,
            vec!["c_2"],
            1,
        ),
        (
            CardQuery {
                entity: Some(" CAROLINE ".into()),
                ..Default::default()
            },
            0,
            10,
            vec!["c_1", "c_2"],
            2,
        ),
        (
            CardQuery {
                topic: Some("pottery".into()),
                ..current.clone()
            },
            0,
            10,
            vec!["c_3"],
            1,
        ),
        (
            CardQuery {
                from: day(7),
                to: day(7),
                ..Default::default()
            },
            0,
            10,
            vec!["c_1", "c_2"],
            2,
        ),
        (
            CardQuery {
                from: day(8),
                ..Default::default()
            },
            0,
            10,
            vec![],
            0,
        ),
        (
            CardQuery {
                to: day(6),
                ..Default::default()
            },
            0,
            10,
            vec![],
            0,
        ),
    ] {
        let shown = format!("{query:?} from {offset}, {limit}");
        assert_eq!(
            find(query, offset, limit),
            (expected.into_iter().map(String::from).collect(), total),
            "{shown}"
        );
    }
    let (others, total) = store
        .find_cards(&ScopeFilter::user("v"), &CardQuery::default(), 0, 10)
        .unwrap();
    assert_eq!(
        (others.len(), total),
        (0, 0),
        "another user's cards are not u's"
    );
}

fn calls_and_turns_are_summed_per_utc_day(place: &Place) {
    let mut store = place.open();
    let at = |call: aril_store::LlmCall, when| aril_store::LlmCall { at: when, ..call };
    store
        .record_llm_calls(&[
            at(call("encode", 100, false), utc(2026, 3, 1, 23)),
            at(call("encode", 50, false), utc(2026, 3, 1, 1)),
            at(call("plan", 7, false), utc(2026, 3, 1, 12)),
            at(call("encode", 30, false), utc(2026, 3, 4, 0)),
        ])
        .unwrap();
    let days: Vec<(String, String, u64, u64, u64)> = store
        .llm_usage_by_day()
        .unwrap()
        .into_iter()
        .map(|d| {
            (
                d.day.to_string(),
                d.purpose,
                d.calls,
                d.prompt_tokens,
                d.completion_tokens,
            )
        })
        .collect();
    assert_eq!(
        days,
        [
            ("2026-03-01".into(), "encode".into(), 2, 150, 20),
            ("2026-03-01".into(), "plan".into(), 1, 7, 10),
            ("2026-03-04".into(), "encode".into(), 1, 30, 10),
        ]
    );
    let stored = |n, role, when| {
        let mut t = turn("u", n);
        t.turn.turn.role = role;
        t.turn.id = t.turn.turn.id();
        t.turn.ingest_time = when;
        t
    };
    commit_turns(
        &mut *store,
        &[
            stored(1, Role::User, utc(2026, 3, 1, 0)),
            stored(2, Role::Assistant, utc(2026, 3, 1, 12)),
            stored(3, Role::User, utc(2026, 3, 1, 23)),
            stored(4, Role::User, utc(2026, 3, 2, 9)),
        ],
    );
    let turns: Vec<(String, Role, u64)> = store
        .turns_by_day()
        .unwrap()
        .into_iter()
        .map(|d| (d.day.to_string(), d.role, d.turns))
        .collect();
    let day = |d: &str| d.to_string();
    assert_eq!(
        turns,
        [
            (day("2026-03-01"), Role::Assistant, 1),
            (day("2026-03-01"), Role::User, 2),
            (day("2026-03-02"), Role::User, 1),
        ]
    );
}

fn a_sessions_turns_are_those_said_in_it_in_store_order(place: &Place) {
    let mut store = place.open();
    let said = |user: &str, n, conversation: &str, session: Option<&str>| {
        let mut t = turn(user, n);
        t.turn.turn.conversation = conversation.into();
        t.turn.turn.session = session.map(String::from);
        t.turn.id = t.turn.turn.id();
        t
    };
    let turns = [
        said("u", 1, "c", Some("s1")),
        said("u", 2, "c", Some("s2")),
        said("u", 3, "c", Some("s1")),
        said("u", 4, "c", None),
        said("u", 5, "d", Some("s1")),
        said("v", 6, "c", Some("s1")),
    ];
    commit_turns(&mut *store, &turns);
    let ids =
        |n: &[usize]| -> Vec<TurnId> { n.iter().map(|i| turns[*i].turn.id.clone()).collect() };
    let u = ScopeFilter::user("u");
    assert_eq!(
        store.session_turns(&u, "c", Some("s1")).unwrap(),
        ids(&[0, 2])
    );
    assert_eq!(store.session_turns(&u, "c", Some("s2")).unwrap(), ids(&[1]));
    assert_eq!(store.session_turns(&u, "c", None).unwrap(), ids(&[3]));
    assert_eq!(store.session_turns(&u, "d", Some("s1")).unwrap(), ids(&[4]));
    assert!(store.session_turns(&u, "c", Some("s3")).unwrap().is_empty());
    assert_eq!(
        store
            .session_turns(&ScopeFilter::user("v"), "c", Some("s1"))
            .unwrap(),
        ids(&[5])
    );
}
