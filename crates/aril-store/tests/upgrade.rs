//! Upgrades of the embedded store: a file of every past schema version, with data in it written
//! as that version wrote it, opens under this build with its data intact and its schema equal to
//! a fresh store's.

use std::collections::BTreeMap;
use std::path::Path;

use aril_core::{Scope, ScopeFilter, SegmentId, TurnId};
use aril_store::scratch::sqlite_file_at_version;
use aril_store::{ApiKeyRecord, SCHEMA_VERSION, SqliteStore, Store};
use rusqlite::Connection;

/// Rows every version can hold, written with the columns that version had.
fn write_rows_of_version(path: &Path, version: i64) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "INSERT INTO turns (id, user_id, conversation, session, role, speaker, text, text_hash,
                            event_time, ingest_time)
         VALUES ('t1', 'alice', 'c', 's1', 'user', 'Alice', 'I work at Acme Logistics.', 'h1',
                 '2024-01-08T09:00:00+00:00', '2024-01-08T09:00:01+00:00'),
                ('t2', 'alice', 'c', 's1', 'assistant', NULL, 'Noted: Acme Logistics.', 'h2',
                 '2024-01-08T09:00:05+00:00', '2024-01-08T09:00:06+00:00');
         INSERT INTO segments (id, user_id, conversation, boundary_score, reason, tokens,
                               start_time, end_time, text_hash)
         VALUES ('g1', 'alice', 'c', 0.5, 'topic_shift', 12, '2024-01-08T09:00:00+00:00',
                 '2024-01-08T09:00:05+00:00', 'gh1');
         INSERT INTO segment_turns (segment_id, ord, turn_id) VALUES ('g1', 0, 't1'), ('g1', 1, 't2');",
    )
    .unwrap();
    if version >= 2 {
        // A second version of the memory t1 (an update), as version 2 wrote it.
        conn.execute_batch(
            "INSERT INTO turns (id, user_id, conversation, role, text, text_hash, ingest_time)
             VALUES ('t3', 'alice', 'c', 'user', 'I work at Beacon Freight.', 'h3',
                     '2024-05-03T09:00:00+00:00');
             INSERT INTO revisions (turn_id, memory_id, version) VALUES ('t3', 't1', 2);
             INSERT INTO segment_turns (segment_id, ord, turn_id) VALUES ('g1', 2, 't3');",
        )
        .unwrap();
    }
    if version >= 3 {
        conn.execute_batch(
            "INSERT INTO consolidation (segment_id, status) VALUES ('g1', 'done');
             INSERT INTO cards (id, user_id, segment_id, kind, text)
             VALUES ('k1', 'alice', 'g1', 'fact', 'Alice works at Acme Logistics.');
             INSERT INTO card_turns (card_id, turn_id) VALUES ('k1', 't1');
             INSERT INTO card_entities (card_id, key, name) VALUES ('k1', 'alice', 'Alice');",
        )
        .unwrap();
    }
    if version >= 4 {
        conn.execute_batch(
            "INSERT INTO llm_calls (at, purpose, model, prompt_tokens, completion_tokens,
                                    counted_locally, latency_ms, attempts)
             VALUES ('2024-01-08T09:01:00+00:00', 'encode', 'm', 100, 20, 0, 900, 1);",
        )
        .unwrap();
    }
}

/// Each table's column names and each index's name: what a fresh and an upgraded file must share.
fn shape(path: &Path) -> BTreeMap<String, Vec<String>> {
    let conn = Connection::open(path).unwrap();
    let mut objects = conn
        .prepare("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
        .unwrap();
    let objects: Vec<(String, String)> = objects
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut shape = BTreeMap::new();
    for (kind, name) in objects {
        let mut columns: Vec<String> = conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .unwrap()
            .query_map([&name], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        columns.sort();
        shape.insert(format!("{kind} {name}"), columns);
    }
    shape
}

fn check_upgraded(path: &Path, from: i64) {
    let mut store = SqliteStore::open(path)
        .unwrap_or_else(|e| panic!("a version-{from} file does not open: {e}"));
    let turns = store
        .turns(&[TurnId("t1".into()), TurnId("t2".into())])
        .unwrap();
    assert_eq!(
        turns
            .iter()
            .map(|t| t.turn.text.as_str())
            .collect::<Vec<_>>(),
        ["I work at Acme Logistics.", "Noted: Acme Logistics."],
        "version {from}"
    );
    assert_eq!(
        turns[0].turn.event_time.map(|t| t.to_rfc3339()),
        Some("2024-01-08T09:00:00+00:00".to_string())
    );
    let segments = store.segments(&[SegmentId("g1".into())]).unwrap();
    assert_eq!(segments.len(), 1, "version {from}");
    let stats = store.stats().unwrap();
    if from >= 2 {
        assert_eq!(
            store.memory_versions(&TurnId("t1".into())).unwrap(),
            [TurnId("t1".into()), TurnId("t3".into())]
        );
        assert!(
            store
                .superseded("alice")
                .unwrap()
                .contains(&TurnId("t1".into()))
        );
    }
    if from >= 3 {
        // Its consolidation outcome and its cards are kept.
        assert_eq!(
            (stats.segments_pending, stats.cards),
            (0, 1),
            "version {from}"
        );
        let cards = store.cards(&ScopeFilter::user("alice"), false).unwrap();
        assert_eq!(cards[0].text, "Alice works at Acme Logistics.");
    } else {
        // Segments closed before cards existed are queued for them.
        assert_eq!(
            (stats.segments_pending, stats.cards),
            (1, 0),
            "version {from}"
        );
        assert_eq!(
            store.queued_segments(10, false).unwrap(),
            [SegmentId("g1".into())]
        );
    }
    let usage = store.llm_usage().unwrap();
    match from >= 4 {
        true => assert_eq!((usage[0].calls, usage[0].o200k_calls), (1, 0)),
        false => assert!(usage.is_empty()),
    }
    // The later versions' columns and tables work.
    let scope = Scope::user("alice").unwrap();
    assert_eq!(store.open_segment(&scope, "c").unwrap().version, 0);
    let claimed = store
        .claim(None, 5, false, std::time::Duration::from_secs(60))
        .unwrap();
    assert_eq!(claimed.len(), usize::from(from < 3), "version {from}");
    let key = ApiKeyRecord {
        id: "k".into(),
        key_hash: "hash".into(),
        user_id: Some("alice".into()),
        admin: false,
        created: "2024-01-08T09:00:00Z".parse().unwrap(),
    };
    store.add_api_key(&key).unwrap();
    assert_eq!(store.api_keys().unwrap(), [key]);
    store.check_integrity().unwrap();
}

#[test]
fn a_file_of_every_past_version_opens_with_its_data_and_the_current_schema() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.sqlite");
    drop(SqliteStore::open(&fresh).unwrap());
    for version in 1..SCHEMA_VERSION {
        let path = dir.path().join(format!("v{version}.sqlite"));
        sqlite_file_at_version(&path, version).unwrap();
        write_rows_of_version(&path, version);
        check_upgraded(&path, version);
        assert_eq!(shape(&path), shape(&fresh), "version {version}");
        // Opening again changes nothing.
        drop(SqliteStore::open(&path).unwrap());
        assert_eq!(shape(&path), shape(&fresh), "version {version} reopened");
    }
}

#[test]
fn a_file_an_earlier_aril_upgraded_half_way_opens() {
    // Before versioned migrations, opening a version-1 or -2 file ran the whole current schema
    // (creating `consolidation` and `llm_calls` with their newest columns), then failed adding
    // those columns again, leaving the file at its old version with the new tables in it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("half.sqlite");
    sqlite_file_at_version(&path, 2).unwrap();
    write_rows_of_version(&path, 2);
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE consolidation (
                 segment_id TEXT PRIMARY KEY REFERENCES segments (id) ON DELETE CASCADE,
                 status     TEXT NOT NULL CHECK (status IN ('pending', 'done', 'failed')),
                 reason     TEXT,
                 attempts   INTEGER NOT NULL DEFAULT 0,
                 claimed_until INTEGER
             );
             CREATE TABLE llm_calls (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, purpose TEXT NOT NULL,
                 model TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
                 completion_tokens INTEGER NOT NULL, counted_locally INTEGER NOT NULL,
                 latency_ms INTEGER NOT NULL, prompt_o200k INTEGER, completion_o200k INTEGER,
                 attempts INTEGER NOT NULL
             );",
        )
        .unwrap();
    check_upgraded(&path, 2);
}

#[test]
fn a_newer_file_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("newer.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    let newer = SCHEMA_VERSION + 1;
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
            [newer.to_string()],
        )
        .unwrap();
    let before = shape(&path);
    let err = SqliteStore::open(&path)
        .err()
        .expect("a newer file is refused");
    assert!(err.to_string().contains("newer than this aril"), "{err}");
    assert_eq!(shape(&path), before);
}
