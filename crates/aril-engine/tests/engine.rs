//! The engine end to end on a real embedder and tantivy, over each store backend (the embedded
//! SQLite file and a scratch PostgreSQL database: the same test code): idempotent ingest, scoped
//! recall, deletion, restart with an open segment, one owner per directory, bad input, memory
//! versions.

use std::sync::atomic::AtomicBool;

mod common;

use aril_engine::{
    Config, Engine, EngineError, IngestOptions, IngestReport, LexicalTurnRoles, MemoryEdit,
    Metadata, NewTurn, Role, Scope, ScopeFilter, SearchRequest, TurnVectors, UnitKind,
};
use chrono::{TimeZone, Utc};
use common::{Place, embedder};

fn open(dir: &std::path::Path) -> Engine {
    Engine::open_with_embedder(dir, Config::default(), embedder()).unwrap()
}

aril_store::conformance!(
    reimporting_the_same_turns_adds_nothing,
    recall_finds_the_relevant_turn_with_its_source_and_date,
    budget_bounds_the_context,
    nothing_crosses_scopes_and_delete_takes_only_its_scope,
    the_open_segment_survives_a_restart,
    a_directory_has_one_owner_and_a_database_is_shared,
    invalid_input_changes_nothing,
    a_question_naming_a_speaker_prefers_what_that_speaker_said,
    the_focus_lists_rank_the_speakers_turns_by_what_they_say_not_by_their_name,
    a_question_naming_two_speakers_focuses_on_both_by_what_they_say,
    a_question_naming_a_month_votes_for_what_was_said_that_month,
    a_question_asking_about_last_week_votes_for_what_was_said_since,
    a_question_about_the_present_puts_the_newest_statement_first,
    a_counting_question_is_searched_again_without_its_counting_words,
    a_question_about_my_age_finds_where_i_said_it,
    an_explained_search_answers_as_the_search_and_shows_each_paths_list,
    sentence_vectors_find_the_sentence_of_a_long_turn_that_answers,
    an_update_is_a_new_version_that_recall_prefers_and_history_keeps,
    deleting_a_memory_removes_every_version_and_rebuilds_what_held_it,
    deleting_a_session_deletes_every_memory_said_in_it_and_nothing_else,
    a_short_reply_is_found_by_its_window_and_a_deleted_turn_leaves_its_neighbours_windows,
    the_bm25_turn_list_ranks_the_dense_roles_turns_unless_told_all,
    session_search_shows_each_session_once_and_lifts_sessions_that_speak_of_it_in_several_turns,
    a_replaced_version_gives_its_session_no_vote_in_session_search,
    a_turn_said_again_word_for_word_is_recalled_once,
    readers_on_several_threads_share_one_engine_and_answer_as_one_alone,
    a_write_embedded_ahead_by_a_reader_runs_no_model_when_it_commits,
    an_expired_memory_is_never_recalled_or_listed_and_the_sweep_purges_it,
    an_immutable_memory_refuses_updates_but_not_deletion,
    a_filtered_search_reads_deeper_until_k_memories_meet_the_filter,
    a_threshold_keeps_the_turns_near_enough_to_the_question,
    a_forgotten_memory_is_not_recalled_from_then_on_and_its_history_keeps_the_interval,
);

fn turn(user: &str, session: &str, n: u32, text: &str) -> NewTurn {
    NewTurn {
        scope: Scope::user(user).unwrap(),
        conversation: "c1".into(),
        session: Some(session.into()),
        role: if n.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        },
        speaker: None,
        text: text.into(),
        event_time: Some(Utc.with_ymd_and_hms(2024, 3, 1, 10, n, 0).unwrap()),
        source_id: Some(format!("{session}:{n}")),
        metadata: None,
        lifecycle: Default::default(),
    }
}

fn conversation(user: &str) -> Vec<NewTurn> {
    let lines = [
        "I adopted a beagle called Pimenta from the shelter.",
        "Beagles love long walks; Pimenta will enjoy the park.",
        "She howls when I leave the flat.",
        "Try short departures and a puzzle feeder.",
        "I signed up for the Lisbon marathon in October.",
        "Build your weekly distance slowly, about ten percent a week.",
        "My knee hurts after long runs.",
        "Outer knee pain is often the iliotibial band; rest and strengthen your hips.",
    ];
    lines
        .iter()
        .enumerate()
        .map(|(n, text)| turn(user, if n < 4 { "s1" } else { "s2" }, n as u32, text))
        .collect()
}

fn ingest(engine: &mut Engine, turns: Vec<NewTurn>, flush: bool) -> IngestReport {
    engine
        .ingest(
            turns,
            &IngestOptions {
                flush,
                ..Default::default()
            },
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap()
}

/// A plain search of `query` in `user`'s scope, `k` units at most.
fn request(user: &str, query: &str, k: usize) -> SearchRequest {
    SearchRequest {
        filter: ScopeFilter::user(user),
        query: query.into(),
        k: Some(k),
        budget: None,
        asked_at: None,
        condition: None,
        threshold: None,
    }
}

/// The paths an explained search of `query` lists.
fn explained_paths(engine: &mut Engine, user: &str, query: &str, k: usize) -> Vec<&'static str> {
    let explained = engine.explain(&request(user, query, k)).unwrap();
    explained.trace.lists.iter().map(|l| l.path).collect()
}

fn search(engine: &mut Engine, user: &str, query: &str, k: usize) -> aril_engine::SearchResponse {
    engine.search(&request(user, query, k)).unwrap()
}

/// The real embedder, counting the sequences it embeds.
struct Watched {
    inner: std::sync::Arc<dyn aril_engine::embed::Embedder>,
    sequences: std::sync::atomic::AtomicUsize,
}

impl aril_engine::embed::Embedder for Watched {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn max_pieces(&self) -> usize {
        self.inner.max_pieces()
    }
    fn tokenize(
        &self,
        text: &str,
    ) -> Result<aril_engine::embed::Pieces, aril_engine::embed::EmbedError> {
        self.inner.tokenize(text)
    }
    fn embed_pieces(
        &self,
        seqs: &[&[u32]],
    ) -> Result<Vec<Vec<f32>>, aril_engine::embed::EmbedError> {
        self.sequences
            .fetch_add(seqs.len(), std::sync::atomic::Ordering::SeqCst);
        self.inner.embed_pieces(seqs)
    }
}

/// `prepare` (a reader) embeds a write's turns and stores nothing; the write that commits them
/// runs the model for none of them, and leaves what a plain ingest leaves: the same turns,
/// segments and cached embeddings, found by the same search.
fn a_write_embedded_ahead_by_a_reader_runs_no_model_when_it_commits(place: &Place) {
    use std::sync::atomic::Ordering;
    let watched = std::sync::Arc::new(Watched {
        inner: embedder(),
        sequences: Default::default(),
    });
    let mut engine = place.open_embedding_with(watched.clone());
    let turns = conversation("u");
    let prepared = engine.prepare(&turns).unwrap();
    assert!(prepared.embedded() > 0);
    let after_prepare = watched.sequences.load(Ordering::SeqCst);
    assert!(after_prepare > 0);
    let stats = engine.stats().unwrap();
    assert_eq!(
        (stats.store.turns, stats.store.embeddings),
        (0, 0),
        "prepare wrote"
    );

    let report = engine
        .ingest_prepared(
            turns.clone(),
            &prepared,
            &IngestOptions {
                flush: true,
                ..Default::default()
            },
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap();
    assert_eq!(report.turns_added, turns.len());
    assert_eq!(
        watched.sequences.load(Ordering::SeqCst),
        after_prepare,
        "the commit ran the model again"
    );

    let plain = place.another();
    let mut alone = plain.open();
    ingest(&mut alone, turns, true);
    let (ahead, direct) = (engine.stats().unwrap(), alone.stats().unwrap());
    assert_eq!(
        (
            ahead.store.turns,
            ahead.store.segments,
            ahead.store.embeddings
        ),
        (
            direct.store.turns,
            direct.store.segments,
            direct.store.embeddings
        )
    );
    let ids = |r: aril_engine::SearchResponse| -> Vec<String> {
        r.results.into_iter().map(|h| h.id).collect()
    };
    assert_eq!(
        ids(search(&mut engine, "u", "What is the name of my dog?", 3)),
        ids(search(&mut alone, "u", "What is the name of my dog?", 3))
    );

    // Bad input is refused before the model runs.
    let mut bad = conversation("u");
    bad[0].text = String::new();
    assert!(engine.prepare(&bad).is_err());
}

/// The engine is shared by reference between threads: searches, session searches, stats and
/// listings of several users run at once (the first search of each user loads its vectors, so
/// loads race too) and answer exactly what each answers alone.
fn readers_on_several_threads_share_one_engine_and_answer_as_one_alone(place: &Place) {
    fn shared<T: Send + Sync>(_: &T) {}
    let mut engine = place.open();
    for user in ["u", "v", "w"] {
        ingest(&mut engine, conversation(user), true);
    }
    let questions = [
        ("u", "What is the name of my dog?"),
        ("v", "Which marathon did I sign up for?"),
        ("w", "Why does my knee hurt?"),
        ("u", "How should I train for the race?"),
    ];
    let request = |user: &str, query: &str| SearchRequest {
        filter: ScopeFilter::user(user),
        query: query.into(),
        k: Some(3),
        budget: None,
        asked_at: None,
        condition: None,
        threshold: None,
    };
    let answer = |engine: &Engine, user: &str, query: &str| {
        let turns = engine.search(&request(user, query)).unwrap();
        let sessions = engine.search_sessions(&request(user, query)).unwrap();
        let listed = engine.list_turns(&ScopeFilter::user(user), 0, 100).unwrap();
        let ids = |r: &aril_engine::SearchResponse| {
            r.results
                .iter()
                .map(|h| (h.id.clone(), h.text.clone()))
                .collect::<Vec<_>>()
        };
        (
            ids(&turns),
            ids(&sessions),
            listed.1,
            engine.stats().unwrap().store.turns,
        )
    };
    // Alone, one after another, on an engine that has loaded nothing yet; then at once, on
    // another such engine.
    drop(engine);
    let alone: Vec<_> = {
        let fresh = place.open();
        questions
            .iter()
            .map(|(u, q)| answer(&fresh, u, q))
            .collect()
    };
    let engine = place.open();
    shared(&engine);
    let engine = &engine;
    std::thread::scope(|threads| {
        let running: Vec<_> = (0..4)
            .flat_map(|round| {
                questions
                    .iter()
                    .enumerate()
                    .map(move |(i, (u, q))| threads.spawn(move || (i, round, answer(engine, u, q))))
            })
            .collect();
        for handle in running {
            let (i, round, got) = handle.join().expect("a reader thread panicked");
            assert_eq!(
                got, alone[i],
                "question {i} in round {round} answered otherwise"
            );
        }
    });
    assert!(alone[0].0[0].1.contains("Pimenta"), "{:?}", alone[0]);
}

fn reimporting_the_same_turns_adds_nothing(place: &Place) {
    let mut engine = place.open();
    let first = ingest(&mut engine, conversation("u"), true);
    assert_eq!(first.turns_added, 8);
    assert!(
        first.segments_closed >= 2,
        "two sessions make at least two segments"
    );
    let before = engine.stats().unwrap();
    let second = ingest(&mut engine, conversation("u"), true);
    assert_eq!(second.turns_added, 0);
    assert_eq!(second.turns_skipped, 8);
    assert_eq!(second.segments_closed, 0);
    let after = engine.stats().unwrap();
    assert_eq!(before.store.turns, after.store.turns);
    assert_eq!(before.store.segments, after.store.segments);
    assert_eq!(
        after.lexical_units,
        2 * after.store.turns + after.store.segments,
        "each turn is indexed with its window"
    );
    engine.check_integrity().unwrap();
}

fn recall_finds_the_relevant_turn_with_its_source_and_date(place: &Place) {
    let mut engine = place.open();
    ingest(&mut engine, conversation("u"), true);
    let r = search(&mut engine, "u", "What is the name of my dog?", 3);
    assert!(!r.results.is_empty());
    let top = &r.results[0];
    assert!(top.text.contains("Pimenta"), "{top:?}");
    assert!(top.time.is_some());
    assert_eq!(top.source.conversation, "c1");
    assert!(
        top.source.turns.iter().all(|t| t.starts_with("s1:")),
        "{top:?}"
    );
    // Ranks are 1..n and no turn is shown twice.
    let mut shown: Vec<&String> = r.results.iter().flat_map(|h| &h.source.turns).collect();
    let n = shown.len();
    shown.sort();
    shown.dedup();
    assert_eq!(shown.len(), n, "a turn appeared twice");
    assert_eq!(
        r.results.iter().map(|h| h.rank).collect::<Vec<_>>(),
        (1..=r.results.len()).collect::<Vec<_>>()
    );
}

/// Turn `n` of user `u`'s session `s1`, said by a named speaker.
fn said(n: u32, speaker: &str, text: &str) -> NewTurn {
    NewTurn {
        speaker: Some(speaker.into()),
        role: Role::User,
        ..turn("u", "s1", n, text)
    }
}

/// A configuration where every recall list is off but those `on` weights.
fn only_lists(on: impl FnOnce(&mut aril_engine::RecallConfig)) -> Config {
    let mut config = Config::default();
    let r = &mut config.recall;
    (r.w_dense_turns, r.w_lexical_turns, r.w_dense_segments) = (0.0, 0.0, 0.0);
    (r.w_lexical_segments, r.w_lexical_windows) = (0.0, 0.0);
    (r.w_focus, r.w_dated, r.w_present) = (0.0, 0.0, 0.0);
    (r.w_counting, r.w_age) = (0.0, 0.0);
    on(r);
    config
}

/// The texts of the results some list voted for (fused score above 0), best first.
fn voted(found: &aril_engine::SearchResponse) -> Vec<&str> {
    found
        .results
        .iter()
        .filter(|h| h.score > 0.0)
        .map(|h| h.text.as_str())
        .collect()
}

fn a_question_naming_a_speaker_prefers_what_that_speaker_said(place: &Place) {
    // Caroline's question echoes the words of the question asked later; Melanie's answer holds
    // what is asked.
    let turns = vec![
        said(
            0,
            "Caroline",
            "Melanie, what do you paint these days? I paint the sea.",
        ),
        said(
            1,
            "Melanie",
            "Mostly small watercolours of the flowers in my garden.",
        ),
        said(2, "Caroline", "I went to the pottery fair on Saturday."),
        said(
            3,
            "Melanie",
            "My kids and I went camping at the lake last week.",
        ),
    ];
    let question = "What does Melanie paint?";
    let top = |engine: &mut Engine| search(engine, "u", question, 4).results[0].text.clone();
    let mut engine = place.open();
    ingest(&mut engine, turns, true);
    assert!(
        top(&mut engine).starts_with("Melanie: Mostly"),
        "{}",
        top(&mut engine)
    );
    // Without the focus, what the other speaker said about painting ranks first: the focus is
    // what finds Melanie's own words.
    drop(engine);
    let mut config = Config::default();
    config.recall.w_focus = 0.0;
    let mut unfocused = place.open_with(config);
    assert!(
        top(&mut unfocused).starts_with("Caroline:"),
        "{}",
        top(&mut unfocused)
    );
    // A question naming nobody is not focused.
    let r = search(&mut unfocused, "u", "Who went camping?", 1);
    assert!(r.results[0].text.contains("camping"));
}

fn the_focus_lists_rank_the_speakers_turns_by_what_they_say_not_by_their_name(place: &Place) {
    // Melanie's first turn is all name and no content; her second answers the question.
    let turns = vec![
        said(
            0,
            "Caroline",
            "Melanie! Hi Melanie, how are you doing, Melanie?",
        ),
        said(
            1,
            "Melanie",
            "Melanie here, Melanie is fine, thanks Caroline.",
        ),
        said(2, "Caroline", "I went to the pottery fair on Saturday."),
        said(
            3,
            "Melanie",
            "I can't have peanuts: my throat swells and I need a doctor.",
        ),
    ];
    // Only the focus lists vote, so the order is theirs alone.
    let mut engine = place.open_with(only_lists(|r| r.w_focus = 1.0));
    ingest(&mut engine, turns, true);
    let found = search(&mut engine, "u", "What is Melanie allergic to?", 4);
    let texts: Vec<&str> = found.results.iter().map(|h| h.text.as_str()).collect();
    assert!(
        texts[0].starts_with("Melanie: I can't have peanuts"),
        "{texts:?}"
    );
    // The focus lists hold the named speaker's turns only: Caroline's voted nowhere.
    let voted = voted(&found);
    assert!(voted.iter().all(|t| t.starts_with("Melanie:")), "{voted:?}");
}

fn a_question_naming_two_speakers_focuses_on_both_by_what_they_say(place: &Place) {
    // A group chat: Caroline's turn is all names, Melanie's answers, and Bob, who is not asked
    // about, says the most alike.
    let turns = vec![
        said(
            0,
            "Caroline",
            "Melanie! Hi Melanie and hi Caroline here, how are Melanie and Caroline?",
        ),
        said(1, "Bob", "I am allergic to peanuts and to cats."),
        said(
            2,
            "Melanie",
            "I can't have peanuts: my throat swells and I need a doctor.",
        ),
        said(3, "Caroline", "I went to the pottery fair on Saturday."),
    ];
    // Only the focus lists vote, so the order is theirs alone.
    let mut engine = place.open_with(only_lists(|r| r.w_focus = 1.0));
    ingest(&mut engine, turns, true);
    let found = search(
        &mut engine,
        "u",
        "What are Caroline and Melanie allergic to?",
        4,
    );
    let voted = voted(&found);
    assert!(!voted.is_empty(), "no focus list voted");
    assert!(
        voted[0].starts_with("Melanie: I can't have peanuts"),
        "{voted:?}"
    );
    assert!(
        voted
            .iter()
            .all(|t| t.starts_with("Melanie:") || t.starts_with("Caroline:")),
        "Bob's turn voted: {voted:?}"
    );
}

/// A user turn said on the 10th of `month` 2023, in session `s1` for March and `s2` otherwise.
fn said_in(month: u32, n: u32, text: &str) -> NewTurn {
    NewTurn {
        event_time: Some(Utc.with_ymd_and_hms(2023, month, 10, 9, n, 0).unwrap()),
        role: Role::User,
        ..turn("u", if month == 3 { "s1" } else { "s2" }, n, text)
    }
}

/// A painting in March and another in May, each with a turn beside it.
fn painted_in_march_and_may() -> Vec<NewTurn> {
    vec![
        said_in(3, 0, "I painted a sunset over the lake with my kids."),
        said_in(3, 1, "The weather was awful all week."),
        said_in(5, 2, "We painted a sunrise on the beach together."),
        said_in(5, 3, "I bought new running shoes."),
    ]
}

fn a_question_naming_a_month_votes_for_what_was_said_that_month(place: &Place) {
    // The same activity said in March and in May; only the May one was said in the month asked.
    let turns = painted_in_march_and_may();
    // Only the date lists vote, so the order and the votes are theirs alone.
    let mut engine = place.open_with(only_lists(|r| r.w_dated = 1.0));
    ingest(&mut engine, turns, true);
    let found = search(&mut engine, "u", "What did they paint in May 2023?", 4);
    let voted = voted(&found);
    assert!(
        voted[0].ends_with("We painted a sunrise on the beach together."),
        "{voted:?}"
    );
    assert!(
        voted
            .iter()
            .all(|t| t.contains("sunrise") || t.contains("shoes")),
        "{voted:?}"
    );
    // A question naming no period gets no date lists: nothing votes.
    let plain = search(&mut engine, "u", "What did they paint?", 4);
    assert!(
        plain.results.iter().all(|h| h.score == 0.0),
        "{:?}",
        plain.results
    );
}

fn a_counting_question_is_searched_again_without_its_counting_words(place: &Place) {
    // One turn says what is counted; the others share the question's counting words only.
    let turns = vec![
        said_in(5, 0, "I still have to return the boots to Zara."),
        said_in(
            5,
            1,
            "Can you help me calculate the total of my charity donations?",
        ),
        said_in(5, 2, "How many hours are in a week, in total?"),
        said_in(5, 3, "The weather was awful all week."),
    ];
    // Only the counting lists vote, so the order and the votes are theirs alone.
    let mut engine = place.open_with(only_lists(|r| r.w_counting = 1.0));
    ingest(&mut engine, turns, true);
    let question = "How many items in total do I still have to return to the store?";
    let found = search(&mut engine, "u", question, 4);
    let counted = voted(&found);
    assert!(
        counted
            .first()
            .is_some_and(|t| t.ends_with("I still have to return the boots to Zara.")),
        "{counted:?}"
    );
    let paths = explained_paths(&mut engine, "u", question, 4);
    assert!(paths.contains(&"counting focus: dense"), "{paths:?}");
    // A question that counts nothing, or only measures time, gets no counting lists.
    for plain in [
        "What do I still have to return to the store?",
        "How many days ago did I return the boots?",
    ] {
        let found = search(&mut engine, "u", plain, 4);
        assert!(voted(&found).is_empty(), "{plain}: {:?}", found.results);
    }
}

fn a_question_about_my_age_finds_where_i_said_it(place: &Place) {
    // The age is said in passing; the other turns hold numbers or the question's own words.
    let mut turns = vec![
        said_in(5, 0, "My friend Rachel is getting married next year."),
        said_in(5, 1, "I'm 5 minutes away from the station."),
        said_in(
            5,
            2,
            "I'm 34, so my skin has changed a lot, any cream you'd suggest?",
        ),
        said_in(5, 3, "My mom is 55 and she loves gardening."),
    ];
    // The same words said by the assistant are not the user's age.
    turns.push(NewTurn {
        role: Role::Assistant,
        ..said_in(5, 4, "I'm 40 years old, as assistants go.")
    });
    // Only the age lists vote, so the order and the votes are theirs alone.
    let mut engine = place.open_with(only_lists(|r| r.w_age = 2.0));
    ingest(&mut engine, turns, true);
    let question = "How old will I be when Rachel gets married?";
    let found = search(&mut engine, "u", question, 5);
    let aged = voted(&found);
    assert_eq!(aged.len(), 1, "{:?}", found.results);
    assert!(aged[0].ends_with("so my skin has changed a lot, any cream you'd suggest?"));
    let paths = explained_paths(&mut engine, "u", question, 5);
    assert!(paths.contains(&"age focus: statements"), "{paths:?}");
    // A question about someone else's age, or about no age, gets no age lists.
    for plain in ["How old is my mom?", "When is Rachel getting married?"] {
        let found = search(&mut engine, "u", plain, 5);
        assert!(voted(&found).is_empty(), "{plain}: {:?}", found.results);
    }
}

fn an_explained_search_answers_as_the_search_and_shows_each_paths_list(place: &Place) {
    let turns = painted_in_march_and_may();
    let mut engine = place.open();
    ingest(&mut engine, turns, true);
    let asked = |query: &str| SearchRequest {
        filter: ScopeFilter::user("u"),
        query: query.into(),
        k: Some(3),
        budget: None,
        asked_at: Some(Utc.with_ymd_and_hms(2023, 12, 1, 0, 0, 0).unwrap()),
        condition: None,
        threshold: None,
    };
    for query in ["What did they paint in May 2023?", "What shoes did I buy?"] {
        let explained = engine.explain(&asked(query)).unwrap();
        let searched = engine.search(&asked(query)).unwrap();
        let ids = |r: &aril_engine::SearchResponse| -> Vec<(String, String)> {
            r.results
                .iter()
                .map(|h| (h.id.clone(), format!("{:.6}", h.score)))
                .collect()
        };
        assert_eq!(ids(&explained.response), ids(&searched), "{query}");
        let paths: Vec<&str> = explained.trace.lists.iter().map(|l| l.path).collect();
        assert!(
            paths.contains(&"dense turns") && paths.contains(&"BM25 turns"),
            "{paths:?}"
        );
        // The fused list is what the answer was packed from, in its order.
        let fused: Vec<&str> = explained
            .trace
            .fused
            .iter()
            .map(|f| f.unit.as_str())
            .collect();
        let shown: Vec<&str> = explained
            .response
            .results
            .iter()
            .map(|h| h.id.as_str())
            .collect();
        assert_eq!(&fused[..shown.len()], &shown[..], "{query}");
        // Each list is ranked from 1, best first, by its own score.
        for list in &explained.trace.lists {
            assert!(list.units.iter().zip(1..).all(|(u, rank)| u.rank == rank));
            assert!(
                list.units.windows(2).all(|w| w[0].score >= w[1].score),
                "{} is best first",
                list.path
            );
        }
    }
    // Only the question naming a month gets the date focus's lists.
    let dated = engine
        .explain(&asked("What did they paint in May 2023?"))
        .unwrap();
    let plain = engine.explain(&asked("What shoes did I buy?")).unwrap();
    let has_dates = |e: &aril_engine::Explanation| {
        e.trace
            .lists
            .iter()
            .any(|l| l.path.starts_with("date focus"))
    };
    assert!(has_dates(&dated) && !has_dates(&plain));
    // A filtered search is not explained: it is refused, not answered without its filter.
    let filtered = SearchRequest {
        threshold: Some(0.5),
        ..asked("What shoes did I buy?")
    };
    assert!(engine.explain(&filtered).is_err());
}

fn a_question_about_the_present_puts_the_newest_statement_first(place: &Place) {
    // The job said in March, the new one in May, each as relevant as the other; the newest-first
    // list alone votes, so the order is its own.
    let turns = vec![
        said_in(3, 0, "I work as a data analyst at Acme Logistics."),
        said_in(3, 1, "The weather was awful all week."),
        said_in(
            5,
            2,
            "I work as a machine learning engineer at Globex Health.",
        ),
        said_in(5, 3, "I bought new running shoes."),
    ];
    let mut engine = place.open_with(only_lists(|r| {
        (r.w_dense_turns, r.w_present) = (1.0, 1.0);
    }));
    ingest(&mut engine, turns, true);
    let job = |found: &aril_engine::SearchResponse, employer: &str| {
        found.results.iter().position(|h| h.text.contains(employer))
    };
    for question in ["Where do I work now?", "What is my current job?"] {
        let found = search(&mut engine, "u", question, 4);
        let (newer, older) = (job(&found, "Globex"), job(&found, "Acme"));
        assert!(
            newer.is_some_and(|n| older.is_none_or(|o| n < o)),
            "{question}: {found:?}"
        );
    }
    // Without a cue of the present the list is not added: the scores are the dense list's alone.
    let scored = |engine: &mut Engine| {
        search(engine, "u", "Where did I work as a data analyst?", 4)
            .results
            .iter()
            .map(|h| (h.text.clone(), h.score))
            .collect::<Vec<_>>()
    };
    let past = scored(&mut engine);
    drop(engine);
    let mut dense_only = place.open_with(only_lists(|r| r.w_dense_turns = 1.0));
    assert_eq!(past, scored(&mut dense_only));
}

fn a_question_asking_about_last_week_votes_for_what_was_said_since(place: &Place) {
    // The same activity said in March and in May; asked in mid-May, "last week" is May's.
    let turns = vec![
        said_in(3, 0, "I painted a sunset over the lake with my kids."),
        said_in(5, 1, "We painted a sunrise on the beach together."),
        said_in(5, 2, "I bought new running shoes."),
    ];
    let mut engine = place.open_with(only_lists(|r| r.w_dated = 1.0));
    ingest(&mut engine, turns, true);
    let ask = |engine: &mut Engine, asked_at| {
        engine
            .search(&SearchRequest {
                filter: ScopeFilter::user("u"),
                query: "What did they paint last week?".into(),
                k: Some(3),
                budget: None,
                asked_at,
                condition: None,
                threshold: None,
            })
            .unwrap()
    };
    let may = ask(
        &mut engine,
        Some(Utc.with_ymd_and_hms(2023, 5, 15, 12, 0, 0).unwrap()),
    );
    let voted_may = voted(&may);
    assert!(
        voted_may[0].ends_with("We painted a sunrise on the beach together."),
        "{voted_may:?}"
    );
    assert!(
        voted_may.iter().all(|t| !t.contains("sunset")),
        "{voted_may:?}"
    );
    // Asked at no known time, "last week" names no period: nothing votes.
    let unknown = ask(&mut engine, None);
    assert!(
        unknown.results.iter().all(|h| h.score == 0.0),
        "{unknown:?}"
    );
}

fn sentence_vectors_find_the_sentence_of_a_long_turn_that_answers(place: &Place) {
    // One sentence of a long turn about a career answers; two short turns are about age as a
    // whole. Each turn in a session of its own, so no segment lends one turn another's rank.
    let turns = vec![
        turn(
            "u",
            "s1",
            0,
            "I've been thinking a lot about my career lately. I work in accounting at a \
             mid-sized firm, and the hours have been brutal during tax season. My manager keeps \
             piling on new clients without hiring anyone. I'm considering a move into data \
             science, and I've started an online course in Python and statistics. By the way, I \
             just turned 32 last month, so I wonder if it's too late to switch. What do you \
             think about bootcamps versus a master's degree?",
        ),
        turn(
            "u",
            "s2",
            2,
            "My nephew is turning seven next weekend and I need a birthday gift idea.",
        ),
        turn(
            "u",
            "s3",
            4,
            "At what age should a child learn to ride a bike?",
        ),
    ];
    let question = "How old did I turn recently?";
    let first = |turn_vectors| {
        let mut config = only_lists(|r| r.w_dense_turns = 1.0);
        config.turn_vectors = turn_vectors;
        let place = place.like();
        let mut engine = place.open_with(config);
        ingest(&mut engine, turns.clone(), true);
        search(&mut engine, "u", question, 3).results[0]
            .text
            .clone()
    };
    let by_sentence = first(TurnVectors::Sentences);
    assert!(by_sentence.contains("turned 32"), "{by_sentence}");
    // The whole turn's one vector averages that sentence away among the rest.
    let whole = first(TurnVectors::Chunks);
    assert!(!whole.contains("turned 32"), "{whole}");
}

fn budget_bounds_the_context(place: &Place) {
    let mut engine = place.open();
    ingest(&mut engine, conversation("u"), true);
    let r = engine
        .search(&SearchRequest {
            filter: ScopeFilter::user("u"),
            query: "knee pain after running".into(),
            k: Some(10),
            budget: Some(40),
            asked_at: None,
            condition: None,
            threshold: None,
        })
        .unwrap();
    assert!(r.context_tokens <= 40, "{}", r.context_tokens);
    assert_eq!(
        r.context_tokens,
        r.results.iter().map(|h| h.tokens).sum::<usize>()
    );
    assert!(!r.results.is_empty());
}

fn nothing_crosses_scopes_and_delete_takes_only_its_scope(place: &Place) {
    let mut engine = place.open();
    ingest(&mut engine, conversation("alice"), true);
    ingest(&mut engine, conversation("bob"), true);
    let r = search(&mut engine, "alice", "beagle Pimenta", 10);
    assert!(!r.results.is_empty());
    for hit in &r.results {
        let turns = engine.turns(&[aril_core::TurnId(hit.id.clone())]).unwrap();
        assert!(turns.iter().all(|t| t.turn.scope.user_id == "alice"));
    }
    let report = engine.delete(&ScopeFilter::user("alice")).unwrap();
    assert_eq!(report.turns, 8);
    assert!(
        search(&mut engine, "alice", "beagle Pimenta", 10)
            .results
            .is_empty()
    );
    assert!(
        !search(&mut engine, "bob", "beagle Pimenta", 10)
            .results
            .is_empty()
    );
    let stats = engine.stats().unwrap();
    assert_eq!(stats.store.users, 1);
    assert_eq!(
        stats.lexical_units,
        2 * stats.store.turns + stats.store.segments
    );
    match engine.delete(&ScopeFilter::user("carol")) {
        Err(EngineError::Store(aril_store::StoreError::UnknownScope(_))) => {}
        other => panic!("deleting an unknown scope: {other:?}"),
    }
    engine.check_integrity().unwrap();
}

fn the_open_segment_survives_a_restart(place: &Place) {
    let turns = conversation("u");
    {
        let mut engine = place.open();
        ingest(&mut engine, turns[..2].to_vec(), false);
        let stats = engine.stats().unwrap();
        assert_eq!(stats.store.open_segment_turns, 2);
        assert_eq!(stats.store.segments, 0);
        // Open-segment turns are searchable as turns already.
        assert!(!search(&mut engine, "u", "beagle", 5).results.is_empty());
    }
    let mut engine = place.open();
    ingest(&mut engine, turns[2..].to_vec(), true);
    let (segments, _) = engine
        .segments(&ScopeFilter::user("u"), 0, u64::MAX)
        .unwrap();
    let all: Vec<_> = segments.iter().flat_map(|s| s.turns.clone()).collect();
    let expected: Vec<_> = turns.iter().map(|t| t.id()).collect();
    assert_eq!(
        all, expected,
        "every turn segmented once, in order, across the restart"
    );
    engine.check_integrity().unwrap();
}

/// An embedded store's directory has one owner; engines sharing a PostgreSQL store (the
/// processes of a scaled-out service) each see the others' writes and deletions at once, and
/// concurrent writers of one conversation lose nothing and segment every turn exactly once.
fn a_directory_has_one_owner_and_a_database_is_shared(place: &Place) {
    let mut first = place.open();
    if !place.shared() {
        match Engine::open_with_embedder(place.dir(), Config::default(), embedder()) {
            Err(EngineError::Busy { holder, .. }) => assert!(holder.contains("pid")),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("two engines own one directory"),
        }
        return;
    }
    let mut second = place.open_elsewhere();
    ingest(&mut first, conversation("u"), true);
    let found = search(&mut second, "u", "what is the dog called", 3);
    assert!(
        found.results.iter().any(|h| h.text.contains("Pimenta")),
        "{found:?}"
    );
    second.delete(&ScopeFilter::user("u")).unwrap();
    assert!(
        search(&mut first, "u", "what is the dog called", 3)
            .results
            .is_empty()
    );

    // Two writers stream into one conversation at once, each its own turns.
    let streams: Vec<Vec<NewTurn>> = (0..2)
        .map(|w| {
            (0..24)
                .map(|n| {
                    let mut t = turn(
                        "w",
                        "s1",
                        n,
                        &format!("writer {w} says line {n} about topic {}", n / 6),
                    );
                    t.source_id = Some(format!("{w}:{n}"));
                    t.event_time = Some(Utc.with_ymd_and_hms(2024, 3, 1 + w, 10, n, 0).unwrap());
                    t
                })
                .collect()
        })
        .collect();
    let engines = [first, second];
    std::thread::scope(|s| {
        for (mut engine, stream) in engines.into_iter().zip(streams.clone()) {
            s.spawn(move || {
                for t in stream {
                    ingest(&mut engine, vec![t], false);
                }
            });
        }
    });
    let mut check = place.open();
    ingest(&mut check, Vec::new(), true);
    let stats = check.stats().unwrap();
    assert_eq!(stats.store.turns, 48);
    let segmented: Vec<_> = check
        .segments(&ScopeFilter::user("w"), 0, u64::MAX)
        .unwrap()
        .0
        .iter()
        .flat_map(|s| s.turns.clone())
        .collect();
    let mut unique = segmented.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), segmented.len(), "a turn in two segments");
    assert_eq!(
        segmented.len() as u64 + stats.store.open_segment_turns,
        48,
        "every turn in one place of the segmentation"
    );
    check.check_integrity().unwrap();
}

/// Recall by the window list alone: every other list has weight 0, so a hit with a score above 0
/// was found through a window.
fn windows_only() -> Config {
    let mut config = Config::default();
    let r = &mut config.recall;
    (r.w_dense_turns, r.w_lexical_turns, r.w_dense_segments) = (0.0, 0.0, 0.0);
    (r.w_lexical_segments, r.w_focus, r.w_lexical_windows) = (0.0, 0.0, 1.0);
    config
}

/// The source ids of the hits the window list found.
fn found_by_windows(r: &aril_engine::SearchResponse) -> Vec<String> {
    r.results
        .iter()
        .filter(|h| h.score > 0.0)
        .flat_map(|h| h.source.turns.clone())
        .collect()
}

fn a_short_reply_is_found_by_its_window_and_a_deleted_turn_leaves_its_neighbours_windows(
    place: &Place,
) {
    let mut turns = vec![
        turn(
            "u",
            "s1",
            0,
            "Could you share your vegan ice cream recipe with me?",
        ),
        turn("u", "s1", 1, "Sure thing, I will send it to you tomorrow."),
        turn("u", "s1", 2, "Thanks! My family will love it."),
        turn("u", "s1", 3, "Let me know how it turns out."),
        turn("u", "s1", 4, "I will. Off to the gym now."),
    ];
    // Another session: its turns are never in a window of s1's.
    turns.push(turn(
        "u",
        "s2",
        5,
        "Is the bakery on Rua Augusta open late?",
    ));
    turns.push(turn("u", "s2", 6, "Until nine on weekdays."));
    let mut engine = place.open_with(windows_only());
    ingest(&mut engine, turns, true);
    let r = search(&mut engine, "u", "vegan ice cream recipe", 10);
    let mut found = found_by_windows(&r);
    found.sort();
    // The question and the two turns after it hold its words in their windows; s1:3 is three
    // places away.
    assert_eq!(found, ["s1:0", "s1:1", "s1:2"], "{:?}", r.results);
    // A window ends with its session: the next session's first turn does not see the gym.
    let r = search(&mut engine, "u", "gym", 10);
    let mut found = found_by_windows(&r);
    found.sort();
    assert_eq!(found, ["s1:2", "s1:3", "s1:4"], "{:?}", r.results);
    // Deleting the question takes its words out of its neighbours' windows too.
    let question = turn_id(&engine, "u", "s1:0");
    engine.delete_memory(&question).unwrap();
    let r = search(&mut engine, "u", "ice cream recipe", 10);
    assert_eq!(
        found_by_windows(&r),
        Vec::<String>::new(),
        "{:?}",
        r.results
    );
    let stats = engine.stats().unwrap();
    assert_eq!(
        stats.lexical_units,
        2 * stats.store.turns + stats.store.segments
    );
    // A turn added later widens the windows before it.
    ingest(
        &mut engine,
        vec![turn("u", "s1", 7, "The gym has a new climbing wall.")],
        true,
    );
    let r = search(&mut engine, "u", "climbing wall", 10);
    let found = found_by_windows(&r);
    let mut found = found;
    found.sort();
    assert_eq!(found, ["s1:3", "s1:4", "s1:7"], "{:?}", r.results);
    engine.check_integrity().unwrap();
}

#[test]
fn a_lost_lexical_index_is_rebuilt_from_the_store() {
    lost_lexical_index(&Place::sqlite());
}

fn invalid_input_changes_nothing(place: &Place) {
    let mut engine = place.open();
    let mut turns = conversation("u");
    turns[5].text = "   ".into();
    let err = engine
        .ingest(
            turns,
            &IngestOptions {
                flush: true,
                ..Default::default()
            },
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap_err();
    assert!(err.to_string().contains("empty text"), "{err}");
    assert_eq!(engine.stats().unwrap().store.turns, 0);
    assert!(
        engine
            .search(&SearchRequest {
                filter: ScopeFilter::user("u"),
                query: "  ".into(),
                k: None,
                budget: None,
                asked_at: None,
                condition: None,
                threshold: None,
            })
            .is_err()
    );
}

fn lost_lexical_index(place: &Place) {
    {
        let mut engine = place.open();
        ingest(&mut engine, conversation("u"), true);
    }
    std::fs::remove_dir_all(place.dir().join("lexical")).unwrap();
    let mut engine = place.open();
    let stats = engine.stats().unwrap();
    assert_eq!(
        stats.lexical_units,
        2 * stats.store.turns + stats.store.segments,
        "turns, their windows and segments are indexed again"
    );
    // The only turn with this word is an assistant turn: found through the rebuilt BM25 index.
    let r = search(&mut engine, "u", "iliotibial", 3);
    assert!(
        r.results.iter().any(|h| h.text.contains("iliotibial")),
        "{r:?}"
    );
    assert_eq!(engine.reindex().unwrap(), stats.lexical_units);
}

/// The saved graph files of a data directory.
fn graph_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir.join("vectors"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

#[test]
fn a_large_scope_is_searched_through_a_saved_graph_that_writes_keep_up_and_deletions_drop() {
    let dir = tempfile::tempdir().unwrap();
    // Dense turn search alone, through a graph from the first chunk on.
    let config = Config {
        ann_min_chunks: 1,
        ..only_lists(|r| r.w_dense_turns = 1.0)
    };
    let open = || Engine::open_with_embedder(dir.path(), config.clone(), embedder()).unwrap();
    let mut engine = open();
    ingest(&mut engine, conversation("u"), true);
    assert!(graph_files(dir.path()).is_empty(), "built on first search");
    let r = search(&mut engine, "u", "which race did I enter", 1);
    assert!(texts(&r).contains("marathon"), "{}", texts(&r));
    assert_eq!(
        graph_files(dir.path()).len(),
        4,
        "turns and segments, graph and meta"
    );

    // A write reaches the graph of a loaded user without reloading it.
    ingest(
        &mut engine,
        vec![turn("u", "s3", 20, "My sister Zuleika visits in May.")],
        false,
    );
    let r = search(&mut engine, "u", "when is my sister coming", 1);
    assert!(texts(&r).contains("Zuleika"), "{}", texts(&r));

    // Reopened, the saved graph is caught up with the turn it was not saved with.
    drop(engine);
    let mut engine = open();
    let r = search(&mut engine, "u", "when is my sister coming", 1);
    assert!(texts(&r).contains("Zuleika"), "{}", texts(&r));

    // A deletion removes the user's graphs before the store forgets the turn; the next search
    // builds them again from what is left.
    let id = turn_id(&engine, "u", "s3:20");
    engine.delete_memory(&id).unwrap();
    assert!(graph_files(dir.path()).is_empty());
    let r = search(&mut engine, "u", "when is my sister coming", 3);
    assert!(!texts(&r).contains("Zuleika"), "{}", texts(&r));
    assert_eq!(graph_files(dir.path()).len(), 4);
    engine.check_integrity().unwrap();

    engine.reindex().unwrap();
    assert!(
        graph_files(dir.path()).is_empty(),
        "reindex drops every graph"
    );
    let r = search(&mut engine, "u", "which race did I enter", 1);
    assert!(texts(&r).contains("marathon"), "{}", texts(&r));
}

/// A crash after the store deleted a user and before the lexical index did: the mark the
/// deletion left makes the next open count the two and rebuild the index, so the deleted words
/// are neither found nor kept. A deletion the store refuses leaves the index as it was.
#[test]
fn a_deletion_cut_short_between_the_store_and_the_lexical_index_is_repaired_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let open = || Engine::open_with_embedder(dir.path(), Config::default(), embedder()).unwrap();
    let mut engine = open();
    ingest(&mut engine, conversation("u"), true);
    ingest(&mut engine, conversation("v"), true);
    let before = engine.stats().unwrap().lexical_units;
    assert!(engine.delete(&ScopeFilter::user("nobody")).is_err());
    drop(engine);
    assert!(
        !dir.path().join("lexical.deleting").exists(),
        "a refused deletion leaves no mark"
    );
    assert_eq!(open().stats().unwrap().lexical_units, before);

    // What `delete` does up to the store's commit, then the process dies.
    std::fs::write(dir.path().join("lexical.deleting"), b"").unwrap();
    let mut store = aril_store::SqliteStore::open(&dir.path().join("store.sqlite")).unwrap();
    aril_store::Store::delete(&mut store, &ScopeFilter::user("u")).unwrap();
    drop(store);

    let mut engine = open();
    let stats = engine.stats().unwrap();
    assert_eq!(
        stats.lexical_units,
        2 * stats.store.turns + stats.store.segments,
        "rebuilt from what the store holds"
    );
    assert!(stats.lexical_units < before);
    assert!(!dir.path().join("lexical.deleting").exists());
    assert!(search(&mut engine, "u", "marathon", 5).results.is_empty());
    assert!(!search(&mut engine, "v", "marathon", 5).results.is_empty());
}

/// An ingest that leaves indexing to its caller (a server, which indexes beside searches)
/// stores the turns at once and makes them searchable only when told: by both lists, for a
/// user whose vectors were already held.
#[test]
fn turns_ingested_for_later_indexing_are_stored_at_once_and_found_once_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::open_with_embedder(dir.path(), Config::default(), embedder()).unwrap();
    let turns = conversation("u");
    let (dog, run) = turns.split_at(4);
    ingest(&mut engine, dog.to_vec(), false);
    assert!(!texts(&search(&mut engine, "u", "beagle", 5)).is_empty());
    let lexical = engine.stats().unwrap().lexical_units;
    let report = engine
        .ingest(
            run.to_vec(),
            &IngestOptions {
                flush: true,
                index_later: true,
            },
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap();
    assert_eq!(report.turns_added, 4);
    assert_eq!(engine.stats().unwrap().store.turns, 8);
    assert_eq!(engine.stats().unwrap().lexical_units, lexical);
    assert!(!texts(&search(&mut engine, "u", "Lisbon marathon October", 8)).contains("marathon"));

    engine.index_committed(&["u"]).unwrap();
    let stats = engine.stats().unwrap();
    assert_eq!(
        stats.lexical_units,
        2 * stats.store.turns + stats.store.segments
    );
    let found = search(&mut engine, "u", "Lisbon marathon October", 8);
    assert!(texts(&found).contains("marathon"), "{}", texts(&found));
    // Indexing again finds nothing new and duplicates nothing.
    engine.index_committed(&["u"]).unwrap();
    assert_eq!(engine.stats().unwrap().lexical_units, stats.lexical_units);
}

#[test]
fn cancel_stops_between_batches_and_keeps_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        ingest_batch: 2,
        ..Config::default()
    };
    let mut engine = Engine::open_with_embedder(dir.path(), config, embedder()).unwrap();
    let cancel = AtomicBool::new(false);
    let report = engine
        .ingest(
            conversation("u"),
            &IngestOptions {
                flush: true,
                ..Default::default()
            },
            &mut |p| {
                if p.done >= 4 {
                    cancel.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            },
            &cancel,
        )
        .unwrap();
    assert!(report.interrupted);
    assert_eq!(report.turns_added, 4);
    engine.check_integrity().unwrap();
    // The batches it kept are searchable: the interrupted ingest indexed them before returning.
    let stats = engine.stats().unwrap();
    assert_eq!(
        stats.lexical_units,
        2 * stats.store.turns + stats.store.segments
    );
    // Running it again finishes the job.
    let rest = ingest(&mut engine, conversation("u"), true);
    assert_eq!(rest.turns_added, 4);
    engine.check_integrity().unwrap();
    let kinds: Vec<UnitKind> = search(&mut engine, "u", "marathon", 10)
        .results
        .iter()
        .map(|h| h.kind)
        .collect();
    assert!(!kinds.is_empty());
}

#[test]
fn an_ingest_of_several_embedding_pools_is_wholly_searchable_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::open_with_embedder(dir.path(), Config::default(), embedder()).unwrap();
    // 2,400 turns in three conversations: three embedding pools, the search indexes catching up
    // at each pool's start and at the end. Every 100th turn is the user's, with a fact of its own.
    let turns: Vec<NewTurn> = (0..2400u32)
        .map(|n| {
            let user_turn = n % 100 == 0;
            NewTurn {
                scope: Scope::user("u").unwrap(),
                conversation: format!("c{}", n / 800),
                session: Some(format!("s{}", n / 40)),
                role: if user_turn {
                    Role::User
                } else {
                    Role::Assistant
                },
                speaker: None,
                text: if user_turn {
                    format!("My locker number {n} holds the blue kayak paddle number {n}.")
                } else {
                    format!("Noted, entry {n}.")
                },
                event_time: Some(
                    Utc.timestamp_opt(1_700_000_000 + i64::from(n) * 60, 0)
                        .unwrap(),
                ),
                source_id: Some(format!("t{n}")),
                metadata: None,
                lifecycle: Default::default(),
            }
        })
        .collect();
    let report = ingest(&mut engine, turns, false);
    assert_eq!(report.turns_added, 2400);
    let stats = engine.stats().unwrap();
    assert_eq!(
        stats.lexical_units,
        2 * stats.store.turns + stats.store.segments
    );
    for n in [0, 1200, 2300] {
        let found = search(&mut engine, "u", &format!("kayak paddle number {n}"), 3);
        assert!(
            texts(&found).contains(&format!("locker number {n} ")),
            "{n}: {}",
            texts(&found)
        );
    }
}

#[test]
fn stored_weights_can_change_and_their_vectors_never_stand_in_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let said = "I keep my climbing shoes in the blue locker at the gym.";
    let at = |conversation: &str| NewTurn {
        conversation: conversation.into(),
        source_id: Some(format!("{conversation}:0")),
        ..turn("u", "s1", 0, said)
    };
    let int8 = Config {
        stored_weights: aril_engine::embed::Weights::Int8,
        ..Config::default()
    };
    let mut engine = Engine::open(dir.path(), int8.clone()).unwrap();
    ingest(&mut engine, vec![at("c1")], true);
    assert_eq!(engine.model_work().texts, 1);
    drop(engine);
    // The same words in another conversation, stored with the full weights: embedded again.
    let f32 = Config::default();
    assert_eq!(f32.stored_weights, aril_engine::embed::Weights::F32);
    let mut engine = Engine::open(dir.path(), f32.clone()).unwrap();
    ingest(&mut engine, vec![at("c2")], true);
    assert_eq!(engine.model_work().texts, 1);
    // Each setting finds its own vectors in the cache from then on, and a search over turns
    // stored with both finds the words, whichever weights it runs with.
    ingest(&mut engine, vec![at("c3")], true);
    assert_eq!(engine.model_work().texts, 1);
    drop(engine);
    for config in [int8, f32] {
        let mut engine = Engine::open(dir.path(), config).unwrap();
        ingest(&mut engine, vec![at("c4")], true);
        assert_eq!(engine.model_work().texts, 0);
        let found = search(&mut engine, "u", "Where are my climbing shoes?", 10);
        assert_eq!(
            found
                .results
                .iter()
                .filter(|h| h.text.contains("blue locker"))
                .count(),
            1,
            "a text said again word for word is recalled once"
        );
        engine.check_integrity().unwrap();
    }
}

fn turn_id(engine: &Engine, user: &str, source: &str) -> aril_core::TurnId {
    let (turns, _) = engine.list_turns(&ScopeFilter::user(user), 0, 100).unwrap();
    turns
        .into_iter()
        .find(|t| t.turn.source_id.as_deref() == Some(source))
        .unwrap_or_else(|| panic!("no turn {source}"))
        .id
}

fn texts(r: &aril_engine::SearchResponse) -> String {
    r.results
        .iter()
        .map(|h| h.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn an_update_is_a_new_version_that_recall_prefers_and_history_keeps(place: &Place) {
    let mut engine = place.open();
    ingest(&mut engine, conversation("u"), true);
    let id = turn_id(&engine, "u", "s1:0");
    let before = engine.stats().unwrap().store.turns;
    let v2 = engine
        .update_memory(&id, &text_edit("I adopted a greyhound called Faisca."))
        .unwrap();
    assert_eq!(v2.turn.source_id.as_deref(), Some("s1:0#v2"));
    let versions = engine.memory(&id).unwrap().unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|t| t.turn.text.as_str())
            .collect::<Vec<_>>(),
        [
            "I adopted a beagle called Pimenta from the shelter.",
            "I adopted a greyhound called Faisca."
        ]
    );
    let view = &engine.memory_views(vec![v2.clone()]).unwrap()[0];
    assert_eq!(view.id, id);
    assert_eq!(view.created, versions[0].turn.event_time.unwrap());
    // Recall shows the newest version only; the old one is kept for history.
    let r = search(&mut engine, "u", "What dog did I adopt?", 10);
    assert!(texts(&r).contains("Faisca"), "{}", texts(&r));
    assert!(r.results.iter().all(|h| h.id != id.0), "{:?}", r.results);
    let (current, total) = engine
        .list_memories(&ScopeFilter::user("u"), 0, 100)
        .unwrap();
    assert_eq!(total, before, "one memory, one current version");
    assert!(current.iter().any(|t| t.id == v2.id) && current.iter().all(|t| t.id != id));
    // The export's snapshot: the same memories, in the same (store) order.
    let ids = engine.current_memory_ids(&ScopeFilter::user("u")).unwrap();
    assert_eq!(
        ids,
        current.iter().map(|t| t.id.clone()).collect::<Vec<_>>()
    );
    assert_eq!(engine.stats().unwrap().store.turns, before + 1);
    // A later version's own id is not a memory id; bad input changes nothing.
    assert!(matches!(
        engine.update_memory(&v2.id, &text_edit("x")),
        Err(EngineError::UnknownMemory(_))
    ));
    assert!(matches!(
        engine.update_memory(&id, &text_edit("   ")),
        Err(EngineError::InvalidInput(_))
    ));
    assert!(matches!(
        engine.update_memory(&id, &MemoryEdit::default()),
        Err(EngineError::InvalidInput(_))
    ));
    assert_eq!(engine.memory(&id).unwrap().unwrap().len(), 2);
    // Metadata alone: a third version with the same text, and the metadata it names.
    let tag = Metadata::try_from(serde_json::json!({"topic": "pets"})).unwrap();
    let v3 = engine
        .update_memory(
            &id,
            &MemoryEdit {
                metadata: Some(tag.clone()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(v3.turn.text, v2.turn.text);
    assert_eq!(v3.turn.metadata.as_ref(), Some(&tag));
    // Text alone keeps the metadata.
    let v4 = engine
        .update_memory(&id, &text_edit("I adopted two greyhounds."))
        .unwrap();
    assert_eq!(v4.turn.metadata.as_ref(), Some(&tag));
    let r = search(&mut engine, "u", "How many greyhounds did I adopt?", 10);
    let hit = r
        .results
        .iter()
        .find(|h| h.id == v4.id.0)
        .expect("the newest version");
    assert_eq!(hit.metadata, Some(tag), "a hit shows its turn's metadata");
    engine.check_integrity().unwrap();
}

fn text_edit(text: &str) -> MemoryEdit {
    MemoryEdit {
        text: Some(text.into()),
        ..Default::default()
    }
}

fn deleting_a_memory_removes_every_version_and_rebuilds_what_held_it(place: &Place) {
    let mut engine = place.open();
    ingest(&mut engine, conversation("u"), true);
    // Streamed turns stay in the open segment: deleting one of those must fix it too.
    ingest(
        &mut engine,
        vec![turn("u", "s3", 20, "My sister Zuleika visits in May.")],
        false,
    );
    let id = turn_id(&engine, "u", "s1:0");
    engine
        .update_memory(&id, &text_edit("I adopted a greyhound called Faisca."))
        .unwrap();
    let before = engine.stats().unwrap();
    let report = engine.delete_memory(&id).unwrap();
    assert_eq!(report.turns, 2);
    let after = engine.stats().unwrap();
    assert_eq!(after.store.turns, before.store.turns - 2);
    assert_eq!(
        after.store.segments, before.store.segments,
        "the segment that held the first version is rebuilt without it"
    );
    assert_eq!(
        after.lexical_units,
        2 * after.store.turns + after.store.segments,
        "each turn is indexed with its window"
    );
    let r = search(
        &mut engine,
        "u",
        "adopted Pimenta beagle Faisca greyhound",
        10,
    );
    assert!(
        !texts(&r).contains("adopted") && !texts(&r).contains("Faisca"),
        "{}",
        texts(&r)
    );
    assert!(engine.memory(&id).unwrap().is_none());
    assert!(matches!(
        engine.delete_memory(&id),
        Err(EngineError::UnknownMemory(_))
    ));
    let open_one = turn_id(&engine, "u", "s3:20");
    engine.delete_memory(&open_one).unwrap();
    assert_eq!(engine.stats().unwrap().store.open_segment_turns, 0);
    engine.check_integrity().unwrap();
    // What is left still recalls.
    let r = search(&mut engine, "u", "marathon in Lisbon", 3);
    assert!(texts(&r).contains("Lisbon"), "{}", texts(&r));
}

fn deleting_a_session_deletes_every_memory_said_in_it_and_nothing_else(place: &Place) {
    let mut engine = place.open();
    ingest(&mut engine, conversation("u"), true);
    ingest(&mut engine, conversation("v"), true);
    let adopted = turn_id(&engine, "u", "s1:0");
    engine
        .update_memory(&adopted, &text_edit("I adopted a greyhound called Faisca."))
        .unwrap();
    let u = ScopeFilter::user("u");
    let before = engine.stats().unwrap();

    // An unknown session is refused and changes nothing.
    let unknown = engine.delete_session(&u, "c1", Some("s9"));
    assert!(
        matches!(unknown, Err(EngineError::UnknownSession { .. })),
        "{unknown:?}"
    );
    assert!(engine.delete_session(&u, "c2", Some("s1")).is_err());
    assert_eq!(engine.stats().unwrap().store, before.store);

    let doomed = engine.session_memories(&u, "c1", Some("s1")).unwrap();
    assert_eq!(doomed.len(), 5, "four turns, and the update's version");
    let report = engine.delete_session(&u, "c1", Some("s1")).unwrap();
    assert_eq!(report.turns, 5);
    let after = engine.stats().unwrap();
    assert_eq!(after.store.turns, before.store.turns - 5);
    assert!(engine.memory(&adopted).unwrap().is_none());
    let r = search(
        &mut engine,
        "u",
        "adopted beagle Pimenta greyhound Faisca howls",
        10,
    );
    assert!(
        !texts(&r).contains("Pimenta") && !texts(&r).contains("Faisca"),
        "{}",
        texts(&r)
    );
    let r = search(&mut engine, "u", "marathon in Lisbon", 3);
    assert!(
        texts(&r).contains("Lisbon"),
        "the other session stays: {}",
        texts(&r)
    );
    let r = search(&mut engine, "v", "adopted beagle Pimenta", 3);
    assert!(
        texts(&r).contains("Pimenta"),
        "another user's session stays: {}",
        texts(&r)
    );
    assert!(engine.session_memories(&u, "c1", Some("s1")).is_err());
    engine.check_integrity().unwrap();
}

#[test]
fn closed_segments_become_cards_with_a_real_model_and_die_with_their_turns() {
    use aril_engine::ConsolidateOptions;
    use aril_engine::llm::LocalServer;
    let server = LocalServer::from_cache().unwrap_or_else(|e| panic!("{e}"));
    let model = server.client().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    let ingested = ingest(&mut engine, conversation("u"), true);
    assert_eq!(
        engine.stats().unwrap().store.segments_pending as usize,
        ingested.segments_closed
    );
    let options = ConsolidateOptions {
        encode: aril_cards_config(),
        ..Default::default()
    };
    let report = engine
        .consolidate(&model, &options, &mut |_| {}, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(
        report.segments_done + report.segments_failed,
        ingested.segments_closed,
        "{report:?}"
    );
    assert_eq!(report.cost.llm_calls as usize, model.ledger().calls().len());
    let stats = engine.stats().unwrap().store;
    assert_eq!(stats.segments_pending, 0);
    assert_eq!(stats.segments_failed as usize, report.segments_failed);
    let cards = engine.cards(&ScopeFilter::user("u"), false).unwrap();
    assert_eq!(cards.len(), report.cards_added);
    let (segments, _) = engine
        .segments(&ScopeFilter::user("u"), 0, u64::MAX)
        .unwrap();
    for c in &cards {
        let home = segments
            .iter()
            .find(|s| s.id == c.segment)
            .expect("a card's segment exists");
        assert!(
            c.source_turns.iter().all(|t| home.turns.contains(t)),
            "{c:?}"
        );
    }
    // Nothing left to do: a second run makes no call.
    let again = engine
        .consolidate(&model, &options, &mut |_| {}, &AtomicBool::new(false))
        .unwrap();
    assert_eq!((again.segments_done, again.cost.llm_calls), (0, 0));
    // Deleting a memory takes the cards of its segment; the rebuilt segment waits for new ones.
    let id = turn_id(&engine, "u", "s1:0");
    engine.delete_memory(&id).unwrap();
    let left = engine.cards(&ScopeFilter::user("u"), false).unwrap();
    assert!(left.iter().all(|c| !c.source_turns.contains(&id)));
    assert_eq!(engine.stats().unwrap().store.segments_pending, 1);
    engine.check_integrity().unwrap();
}

/// Small budgets: the tiny local model is slow and its content is nonsense.
fn aril_cards_config() -> aril_engine::EncodeConfig {
    aril_engine::EncodeConfig {
        max_cards: 1,
        max_tokens: 800,
        ..Default::default()
    }
}

/// Embeddings from an OpenAI-compatible endpoint (llama-server with `--embeddings`, SmolLM2
/// mean-pooled: a poor embedder, but a real one) behind the engine's embedder seam.
#[test]
fn a_real_model_embeds_through_an_openai_compatible_endpoint_and_recall_works() {
    use aril_engine::embed::Embedder;
    use aril_engine::llm::{ClientOptions, LocalServer, OpenAiEmbedder};
    let server = LocalServer::embeddings_from_cache().unwrap_or_else(|e| panic!("{e}"));
    let remote = OpenAiEmbedder::new(server.endpoint().clone(), ClientOptions::default(), 64)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(remote.dim() > 0);
    // A text longer than a chunk is embedded whole, in several chunks on character boundaries.
    let long = "Café in Lisbon, then the marathon. ".repeat(30);
    let chunked = aril_engine::embed::embed_chunked(&remote, &[long.as_str()]).unwrap();
    let chunks = &chunked[0].chunks;
    assert!(chunks.len() >= 3, "{} chunks", chunks.len());
    assert_eq!(
        (chunks[0].start, chunks.last().unwrap().end),
        (0, long.len())
    );
    assert!(chunks.iter().all(|c| c.vector.len() == remote.dim()));
    let dir = tempfile::tempdir().unwrap();
    let mut engine =
        Engine::open_with_embedder(dir.path(), Config::default(), std::sync::Arc::new(remote))
            .unwrap();
    ingest(&mut engine, conversation("u"), true);
    let r = search(&mut engine, "u", "marathon in Lisbon", 3);
    assert!(texts(&r).contains("Lisbon"), "{}", texts(&r));
}

fn the_bm25_turn_list_ranks_the_dense_roles_turns_unless_told_all(place: &Place) {
    // `turn` alternates user (even) and assistant (odd) turns; the assistant's reply holds the
    // most of the question's words, as wordy replies do.
    let turns = vec![
        turn("u", "s1", 0, "I bought a second-hand camera last spring."),
        turn(
            "u",
            "s1",
            1,
            "For that camera, a fast prime lens and a sturdy tripod are the accessories to add.",
        ),
        turn("u", "s1", 2, "I take my tripod along when I hike."),
        turn(
            "u",
            "s1",
            3,
            "Then a light carbon tripod will serve you well.",
        ),
    ];
    let question = "Which lens or tripod accessories suit my camera?";
    // Only the BM25 turn list votes. By default it ranks the dense roles' turns (`dense_roles`
    // is `["user"]`): no assistant reply votes, both user turns do.
    let mut engine = place.open_with(only_lists(|r| r.w_lexical_turns = 1.0));
    ingest(&mut engine, turns, true);
    let found = search(&mut engine, "u", question, 4);
    let mut voted_for = voted(&found);
    voted_for.sort();
    assert_eq!(
        voted_for,
        [
            "User: I bought a second-hand camera last spring.",
            "User: I take my tripod along when I hike.",
        ],
        "{:?}",
        found.results
    );
    drop(engine);
    // With every role admitted, the assistant's reply, richest in the question's words, leads.
    let mut config = only_lists(|r| r.w_lexical_turns = 1.0);
    config.recall.lexical_turn_roles = LexicalTurnRoles::All;
    let mut all = place.open_with(config);
    let found = search(&mut all, "u", question, 4);
    let voted_for = voted(&found);
    assert_eq!(voted_for.len(), 4, "{:?}", found.results);
    assert!(
        voted_for[0].starts_with("Assistant: For that camera"),
        "{voted_for:?}"
    );
}

fn session_search_shows_each_session_once_and_lifts_sessions_that_speak_of_it_in_several_turns(
    place: &Place,
) {
    // `turn` alternates user (even) and assistant (odd) turns; the dense lists hold user turns.
    let turns: Vec<NewTurn> = [
        // Three user turns about the garden.
        (
            "garden",
            0,
            "I planted tomatoes and basil in my vegetable garden.",
        ),
        ("garden", 1, "Tomatoes like full sun."),
        (
            "garden",
            2,
            "My garden beds need compost before the spring planting.",
        ),
        ("garden", 3, "Mix in two inches of compost."),
        ("garden", 4, "I water the garden every evening after work."),
        // One user turn about the garden among others.
        ("errands", 0, "I still have to renew my passport."),
        ("errands", 2, "I bought seeds for the garden at the market."),
        ("errands", 4, "My car needs new tyres before winter."),
        // Nothing about it.
        (
            "work",
            0,
            "My manager moved our weekly meeting to Thursday.",
        ),
        ("work", 2, "The quarterly report is due next month."),
    ]
    .into_iter()
    .map(|(session, n, text)| turn("u", session, n, text))
    .collect();
    let question = "What am I growing in my garden?";
    let mut engine = place.open();
    ingest(&mut engine, turns, true);
    let request = |k| SearchRequest {
        filter: ScopeFilter::user("u"),
        query: question.into(),
        k: Some(k),
        budget: None,
        asked_at: None,
        condition: None,
        threshold: None,
    };
    let sessions = engine.search_sessions(&request(10)).unwrap();
    let names: Vec<&str> = sessions
        .results
        .iter()
        .map(|h| h.source.session.as_deref().unwrap_or(""))
        .collect();
    let mut distinct = names.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct, ["errands", "garden", "work"], "{names:?}");
    assert_eq!(names.len(), 3, "each session once: {names:?}");
    assert_eq!(names[0], "garden", "{:?}", sessions.results);
    // A session's hit is its best unit in turn search, its score that unit's fused score plus
    // the session list's vote; the session list ranks sessions with two or more dense turns.
    let units = search(&mut engine, "u", question, 30);
    let best = |session: &str| {
        units
            .results
            .iter()
            .find(|h| h.source.session.as_deref() == Some(session))
            .unwrap()
    };
    let recall = Config::default().recall;
    for hit in &sessions.results {
        let session = hit.source.session.as_deref().unwrap();
        let unit = best(session);
        assert_eq!(hit.id, unit.id, "{session}");
        let vote = hit.score - unit.score;
        assert!(
            vote > 0.0,
            "{session}: every session here has two or more user turns"
        );
        assert!(
            vote <= recall.w_sessions / (recall.rrf_k + 1.0) + 1e-6,
            "{session}: {vote}"
        );
    }
    assert!(
        (sessions.results[0].score
            - best("garden").score
            - recall.w_sessions / (recall.rrf_k + 1.0))
            .abs()
            < 1e-6,
        "the garden session leads the session list"
    );
    // `k` bounds sessions; without the session list, sessions rank by their best unit.
    assert_eq!(
        engine.search_sessions(&request(2)).unwrap().results.len(),
        2
    );
    drop(engine);
    // The session list reads the question's `session_depth` nearest turns: of three, only one
    // session can hold two, so at most one session gets a vote.
    let mut config = Config::default();
    config.recall.session_depth = 3;
    let mut shallow = place.open_with(config);
    let units = search(&mut shallow, "u", question, 30);
    let voted: Vec<String> = shallow
        .search_sessions(&request(10))
        .unwrap()
        .results
        .iter()
        .filter(|hit| {
            let unit = units.results.iter().find(|u| u.id == hit.id).unwrap();
            hit.score - unit.score > 1e-6
        })
        .filter_map(|hit| hit.source.session.clone())
        .collect();
    assert!(voted.len() <= 1, "{voted:?}");
    drop(shallow);
    // A question about what the assistant said gets no session list (it counts the user's
    // turns): every session scores its best unit's fused score alone.
    let mut engine = place.open();
    let replies = "What did you suggest about what I am growing in my garden?";
    let units = search(&mut engine, "u", replies, 30);
    let sessions = engine
        .search_sessions(&SearchRequest {
            query: replies.into(),
            ..request(10)
        })
        .unwrap();
    assert_eq!(sessions.results.len(), 3, "{:?}", sessions.results);
    for hit in &sessions.results {
        let unit = units.results.iter().find(|u| u.id == hit.id).unwrap();
        assert!((hit.score - unit.score).abs() < 1e-6, "{hit:?} {unit:?}");
    }
    drop(engine);
    let mut config = Config::default();
    config.recall.w_sessions = 0.0;
    let mut plain = place.open_with(config);
    let by_best_unit = plain.search_sessions(&request(10)).unwrap();
    let mut first_seen: Vec<&str> = Vec::new();
    let units = search(&mut plain, "u", question, 30);
    for h in &units.results {
        let s = h.source.session.as_deref().unwrap();
        if !first_seen.contains(&s) {
            first_seen.push(s);
        }
    }
    let plain_names: Vec<&str> = by_best_unit
        .results
        .iter()
        .map(|h| h.source.session.as_deref().unwrap())
        .collect();
    assert_eq!(plain_names, first_seen);
    let err = plain
        .search_sessions(&SearchRequest {
            query: "  ".into(),
            ..request(10)
        })
        .unwrap_err();
    assert!(err.to_string().contains("the query is empty"), "{err}");
}

fn a_replaced_version_gives_its_session_no_vote_in_session_search(place: &Place) {
    // The session list reads the two best dense turns only: both of session "a"'s user turns.
    let mut config = Config::default();
    config.recall.candidates = 2;
    config.recall.session_depth = 2;
    let mut engine = place.open_with(config);
    let turns = [
        ("a", 0, "I am growing tomatoes in my garden."),
        ("a", 1, "Tomatoes like full sun."),
        ("a", 2, "In my garden I grow tomatoes and peppers."),
        ("b", 0, "My car needs new tyres before winter."),
        ("b", 2, "I still have to renew my passport."),
    ]
    .into_iter()
    .map(|(session, n, text)| turn("u", session, n, text))
    .collect();
    ingest(&mut engine, turns, true);
    let question = "What am I growing in my garden?";
    let request = SearchRequest {
        filter: ScopeFilter::user("u"),
        query: question.into(),
        k: Some(5),
        budget: None,
        asked_at: None,
        condition: None,
        threshold: None,
    };
    // The vote is what a session's hit scores above its best unit in turn search.
    let vote_for_a = |engine: &mut Engine| {
        let sessions = engine.search_sessions(&request).unwrap();
        let hit = sessions
            .results
            .iter()
            .find(|h| h.source.session.as_deref() == Some("a"))
            .cloned()
            .unwrap();
        let unit = search(engine, "u", question, 10)
            .results
            .into_iter()
            .find(|h| h.id == hit.id)
            .unwrap();
        hit.score - unit.score
    };
    assert!(
        vote_for_a(&mut engine) > 0.0,
        "two garden turns list session a"
    );
    let id = turn_id(&engine, "u", "a:2");
    engine
        .update_memory(&id, &text_edit("I took up rock climbing on weekends."))
        .unwrap();
    assert_eq!(
        vote_for_a(&mut engine),
        0.0,
        "the replaced garden turn no longer counts: one current garden turn lists nothing"
    );
}

fn a_turn_said_again_word_for_word_is_recalled_once(place: &Place) {
    let mut engine = place.open();
    let said = "My sister Zuleika lives in Porto.";
    ingest(
        &mut engine,
        vec![
            turn("u", "s1", 0, said),
            turn("u", "s1", 2, "I bought a red bicycle."),
            turn("u", "s2", 4, said),
            // The same words from someone else are not a repeat.
            NewTurn {
                speaker: Some("Rui".into()),
                ..turn("u", "s2", 6, said)
            },
        ],
        true,
    );
    // Every repeat is stored.
    assert_eq!(engine.stats().unwrap().store.turns, 4);
    let r = search(&mut engine, "u", "Where does my sister live?", 10);
    let shown: Vec<&str> = r.results.iter().map(|h| h.text.as_str()).collect();
    assert_eq!(
        shown
            .iter()
            .filter(|t| **t == format!("User: {said}"))
            .count(),
        1,
        "{shown:?}"
    );
    assert!(
        shown.contains(&format!("Rui: {said}").as_str()),
        "{shown:?}"
    );
    assert!(
        shown.contains(&"User: I bought a red bicycle."),
        "{shown:?}"
    );
    assert_eq!(r.results.len(), 3, "{shown:?}");
}

fn an_expired_memory_is_never_recalled_or_listed_and_the_sweep_purges_it(place: &Place) {
    let mut engine = place.open();
    let mut turns = conversation("u");
    // The beagle memory expired an hour ago (added late); the marathon one lives a month more.
    turns[0].lifecycle.expires_at = Some(Utc::now() - chrono::Duration::hours(1));
    turns[4].lifecycle.expires_at = Some(Utc::now() + chrono::Duration::days(30));
    ingest(&mut engine, turns, true);
    let beagle = turn_id(&engine, "u", "s1:0");
    let marathon = turn_id(&engine, "u", "s2:4");
    let r = search(&mut engine, "u", "Which shelter dog did I adopt?", 10);
    assert!(
        !texts(&r).contains("I adopted a beagle"),
        "an expired memory is not recalled: {}",
        texts(&r)
    );
    assert_eq!(r.results.len(), 7, "the other turns fill the k places");
    let r = search(&mut engine, "u", "Which marathon did I sign up for?", 3);
    assert!(r.results.iter().any(|h| h.id == marathon.0), "{r:?}");
    let (listed, total) = engine
        .list_memories(&ScopeFilter::user("u"), 0, 100)
        .unwrap();
    assert_eq!(total, 7);
    assert!(listed.iter().all(|t| t.id != beagle));

    let before = engine.stats().unwrap().store.turns;
    assert_eq!(engine.sweep_expired(Utc::now()).unwrap(), 1);
    assert_eq!(engine.stats().unwrap().store.turns, before - 1);
    assert!(engine.memory(&beagle).unwrap().is_none(), "purged");
    assert_eq!(engine.sweep_expired(Utc::now()).unwrap(), 0);
    // A month on, the marathon memory goes too.
    let later = Utc::now() + chrono::Duration::days(31);
    assert_eq!(engine.sweep_expired(later).unwrap(), 1);
    assert!(engine.memory(&marathon).unwrap().is_none());
    engine.check_integrity().unwrap();

    // Opening sweeps: a memory that expires while the store is closed is gone when it opens.
    let mut late = turn("u", "s3", 30, "My locker code is 4417.");
    late.lifecycle.expires_at = Some(Utc::now() - chrono::Duration::seconds(1));
    ingest(&mut engine, vec![late], true);
    let before = engine.stats().unwrap().store.turns;
    drop(engine);
    let engine = place.open();
    assert_eq!(engine.stats().unwrap().store.turns, before - 1);
    engine.check_integrity().unwrap();
}

fn an_immutable_memory_refuses_updates_but_not_deletion(place: &Place) {
    let mut engine = place.open();
    let mut turns = conversation("u");
    turns[0].lifecycle.immutable = true;
    ingest(&mut engine, turns, true);
    let id = turn_id(&engine, "u", "s1:0");
    assert!(matches!(
        engine.update_memory(&id, &text_edit("I adopted a greyhound.")),
        Err(EngineError::ImmutableMemory(_))
    ));
    assert_eq!(engine.memory(&id).unwrap().unwrap().len(), 1, "unchanged");
    // Another memory of the same conversation updates as before.
    let other = turn_id(&engine, "u", "s1:2");
    engine
        .update_memory(&other, &text_edit("She no longer howls."))
        .unwrap();
    assert_eq!(engine.delete_memory(&id).unwrap().turns, 1);
    engine.check_integrity().unwrap();
}

/// A filter keeps the memories that meet it, however deep they rank: 200 memories about coffee
/// tagged `noise` outrank five tagged `keep`, and a search for coffee filtered on `keep` still
/// returns all five (a search that filtered its first candidates only would return fewer).
fn a_filtered_search_reads_deeper_until_k_memories_meet_the_filter(place: &Place) {
    // Lists 4 deep, so that the first pass cannot reach the kept memories through any list.
    let mut config = Config::default();
    config.recall.candidates = 4;
    let mut engine = place.open_with(config.clone());
    let tagged = |n: u32, text: String, kind: &str| {
        let mut t = turn("u", "s1", 0, &text);
        t.event_time = Some(
            Utc.with_ymd_and_hms(2024, 3, 1, 0, 0, 0).unwrap()
                + chrono::Duration::minutes(n.into()),
        );
        t.source_id = Some(format!("s1:{n}"));
        t.metadata = Some(Metadata::try_from(serde_json::json!({"kind": kind, "n": n})).unwrap());
        t
    };
    let mut turns: Vec<NewTurn> = (0..200)
        .map(|n| {
            tagged(
                n,
                format!("Coffee note {n}: I drank an espresso with oat milk."),
                "noise",
            )
        })
        .collect();
    let kept = [
        "My sister Mara keeps bees in Lisbon.",
        "I am learning the cello on Sundays.",
        "Our flat has a blue front door.",
        "The car needs new tyres before winter.",
        "I planted tomatoes on the balcony.",
    ];
    turns.extend((0..5).map(|i| tagged(200 + i, kept[i as usize].to_string(), "keep")));
    ingest(&mut engine, turns, true);
    filtered_searches_find_what_meets_the_filter(&engine, &kept);
    // The same with no prefilter: the search reads its lists deeper until k meet the filter.
    drop(engine);
    config.recall.prefilter_max = 0;
    filtered_searches_find_what_meets_the_filter(&place.open_with(config.clone()), &kept);
    // And when the lists may not be read deeper than the first round (4): the memories the
    // filter admits are ranked all, exactly, rather than fewer than k returned.
    config.recall.filtered_depth_max = 4;
    filtered_searches_find_what_meets_the_filter(&place.open_with(config), &kept);
}

/// The assertions of [`a_filtered_search_reads_deeper_until_k_memories_meet_the_filter`].
fn filtered_searches_find_what_meets_the_filter(engine: &Engine, kept: &[&str]) {
    let filtered = |filter: serde_json::Value, k: usize| {
        engine
            .search(&SearchRequest {
                filter: ScopeFilter::user("u"),
                query: "How do I take my coffee?".into(),
                k: Some(k),
                budget: None,
                asked_at: None,
                condition: Some(aril_engine::Condition::from_mem0(&filter).unwrap()),
                threshold: None,
            })
            .unwrap()
    };
    let r = filtered(serde_json::json!({"kind": "keep"}), 5);
    let mut found: Vec<&str> = r.results.iter().map(|h| h.text.as_str()).collect();
    found.sort_unstable();
    let mut expected: Vec<String> = kept.iter().map(|t| format!("User: {t}")).collect();
    expected.sort_unstable();
    assert_eq!(
        found, expected,
        "all five, found deep under the coffee notes"
    );
    assert!(r.results.iter().all(|h| {
        h.metadata
            .as_ref()
            .is_some_and(|m| m.get("kind") == Some(&serde_json::json!("keep")))
    }));
    // A numeric range over the noise: exactly the memories it admits.
    let r = filtered(
        serde_json::json!({"AND": [{"kind": "noise"}, {"n": {"gte": 10, "lt": 13}}]}),
        10,
    );
    assert_eq!(r.results.len(), 3, "{r:?}");
    // Nothing meets it: an empty answer, not an error.
    assert!(
        filtered(serde_json::json!({"kind": "other"}), 5)
            .results
            .is_empty()
    );
}

/// A threshold keeps the turns whose own vector is that near the question: a low one keeps the
/// user's turns that answer (never an assistant turn: it has no vector), one near 1 keeps none,
/// and one outside 0–1 is refused.
fn a_threshold_keeps_the_turns_near_enough_to_the_question(place: &Place) {
    let mut engine = place.open();
    ingest(&mut engine, conversation("u"), true);
    let search = |threshold: f32| {
        engine.search(&SearchRequest {
            filter: ScopeFilter::user("u"),
            query: "Which shelter dog did I adopt?".into(),
            k: Some(8),
            budget: None,
            asked_at: None,
            condition: None,
            threshold: Some(threshold),
        })
    };
    let all = search(0.0).unwrap();
    assert_eq!(all.results.len(), 4, "the four user turns: {}", texts(&all));
    assert!(all.results.iter().all(|h| h.text.starts_with("User: ")));
    let near = search(0.5).unwrap();
    assert!(
        !near.results.is_empty() && near.results.len() < 4,
        "{}",
        texts(&near)
    );
    assert!(
        texts(&near).contains("I adopted a beagle"),
        "{}",
        texts(&near)
    );
    assert!(search(0.99).unwrap().results.is_empty());
    let err = search(1.5).unwrap_err().to_string();
    assert!(err.contains("threshold must be between 0 and 1"), "{err}");
}

fn search_at(
    engine: &Engine,
    query: &str,
    asked_at: chrono::DateTime<Utc>,
) -> aril_engine::SearchResponse {
    engine
        .search(&SearchRequest {
            filter: ScopeFilter::user("u"),
            query: query.into(),
            k: Some(10),
            budget: None,
            asked_at: Some(asked_at),
            condition: None,
            threshold: None,
        })
        .unwrap()
}

/// `aril forget`: the beagle memory stops holding on 2024-06-01. Asked after that it is not
/// recalled, asked before it still is; it stays listed (with its end) and in history, each
/// version with the interval it held; a restore and a new text make it hold again.
fn a_forgotten_memory_is_not_recalled_from_then_on_and_its_history_keeps_the_interval(
    place: &Place,
) {
    let mut engine = place.open();
    let mut turns = conversation("u");
    turns[2].lifecycle.immutable = true;
    ingest(&mut engine, turns, true);
    let id = turn_id(&engine, "u", "s1:0");
    let said = Utc.with_ymd_and_hms(2024, 3, 1, 10, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(2024, 6, 1, 0, 0, 0).unwrap();
    let everyone = |_: &str| true;
    let (_, listed_before) = engine
        .list_memories(&ScopeFilter::user("u"), 0, 100)
        .unwrap();
    let question = "Which shelter dog did I adopt?";
    let beagle = "I adopted a beagle";
    assert!(texts(&search_at(&engine, question, Utc::now())).contains(beagle));

    let record = engine
        .set_record_validity(&id.0, Some(end), &everyone)
        .unwrap();
    assert_eq!(
        (record.id.as_str(), record.valid_to),
        (id.0.as_str(), Some(end))
    );
    let now = texts(&search_at(&engine, question, Utc::now()));
    assert!(!now.contains(beagle), "forgotten: {now}");
    let in_may = Utc.with_ymd_and_hms(2024, 5, 20, 0, 0, 0).unwrap();
    let then = texts(&search_at(&engine, question, in_may));
    assert!(then.contains(beagle), "it still held in May: {then}");
    assert_eq!(then.matches(beagle).count(), 1, "one version shown: {then}");
    // Listed as it stands, with its end; the same count of memories.
    let (listed, total) = engine
        .record_page(&ScopeFilter::user("u"), None, 0, 100)
        .unwrap();
    assert_eq!(total, listed_before);
    let shown = listed.iter().find(|m| m.id == id.0).expect("still listed");
    assert_eq!(shown.valid_to, Some(end));
    let history = engine.record_history(&id.0, &everyone).unwrap();
    let events: Vec<_> = history
        .iter()
        .map(|h| (h.event, h.valid_from, h.valid_to))
        .collect();
    assert_eq!(
        events,
        [("ADD", said, None), ("FORGET", said, Some(end))],
        "the first version knew no end; the forgetting version says when it ended"
    );

    // Restored, it holds again; a restore of a memory that holds is refused and writes nothing.
    let restored = engine.set_record_validity(&id.0, None, &everyone).unwrap();
    assert_eq!(restored.valid_to, None);
    assert!(texts(&search_at(&engine, question, Utc::now())).contains(beagle));
    assert!(matches!(
        engine.set_record_validity(&id.0, None, &everyone),
        Err(EngineError::InvalidInput(_))
    ));
    assert_eq!(engine.memory(&id).unwrap().unwrap().len(), 3);
    assert_eq!(
        engine.record_history(&id.0, &everyone).unwrap()[2].event,
        "RESTORE"
    );

    // Forgotten again, then corrected with a new text: the new statement holds from when it
    // was made, and the old text's versions end there.
    engine
        .set_record_validity(&id.0, Some(end), &everyone)
        .unwrap();
    let fixed_at = Utc.with_ymd_and_hms(2024, 6, 2, 9, 0, 0).unwrap();
    engine
        .update_memory(
            &id,
            &MemoryEdit {
                text: Some("I adopted a greyhound called Faisca.".into()),
                at: Some(fixed_at),
                ..Default::default()
            },
        )
        .unwrap();
    let history = engine.record_history(&id.0, &everyone).unwrap();
    let last = history.last().unwrap();
    assert_eq!(
        (last.event, last.valid_from, last.valid_to),
        ("UPDATE", fixed_at, None)
    );
    assert_eq!(
        history[0].valid_to,
        Some(fixed_at),
        "replaced by the new text"
    );
    assert_eq!(history[3].valid_to, Some(end), "its own forgetting");
    let now = texts(&search_at(&engine, "Which dog did I adopt?", Utc::now()));
    assert!(now.contains("Faisca") && !now.contains(beagle), "{now}");

    // An immutable memory cannot be forgotten, an unknown or hidden one is missing.
    let howls = turn_id(&engine, "u", "s1:2");
    assert!(matches!(
        engine.set_record_validity(&howls.0, Some(end), &everyone),
        Err(EngineError::ImmutableMemory(_))
    ));
    assert!(matches!(
        engine.set_record_validity(&id.0, Some(end), &|u: &str| u != "u"),
        Err(EngineError::UnknownMemory(_))
    ));
    assert!(matches!(
        engine.set_record_validity("t_nothing", Some(end), &everyone),
        Err(EngineError::UnknownMemory(_))
    ));
    engine.check_integrity().unwrap();
}
