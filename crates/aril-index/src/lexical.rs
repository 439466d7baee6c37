//! BM25 over unit texts with tantivy. Words are indexed under their unit's [`Namespace`] (user,
//! kind, role), so a search in a user's memory is a union of that user's terms, answered with
//! block-max WAND. The commit payload records the highest turn and segment store order indexed
//! (the [`Watermark`]), so after a crash the engine re-adds only what the store has beyond it.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use aril_core::{BM25_QUERY_WORDS, Role, ScopeFilter};
use aril_core::{UnitId, UnitKind};
use aril_store::UnitText;
use serde::{Deserialize, Serialize};
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{
    Language, LowerCaser, PreTokenizedString, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, Token, TokenStream,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::namespace::Namespace;
use crate::scope_stats::{ScopeCache, ScopeStats};
use crate::top_ties::TopWithTies;
use crate::{Hit, IndexError};

/// Highest store order indexed, per unit kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermark {
    pub turn_seq: i64,
    pub segment_seq: i64,
    /// The index holds the turns' lexical windows ([`UnitKind::Window`]); an index an older aril
    /// built does not, and is rebuilt.
    #[serde(default)]
    pub windows: bool,
}

struct Fields {
    id: Field,
    kind: Field,
    user: Field,
    agent: Field,
    run: Field,
    /// The role of the turn a turn or window unit stands for; absent on other units.
    role: Field,
    /// The unit's [`Namespace`].
    namespace: Field,
    /// The unit's words, each under its namespace.
    words: Field,
}

/// The BM25 index of one data directory.
pub struct LexicalIndex {
    index: Index,
    reader: IndexReader,
    /// Taken for a whole change (documents and their commit), so a commit is never another's.
    writer: Mutex<IndexWriter>,
    fields: Fields,
    /// tantivy's `en_stem`: how a unit's text becomes words.
    word_analyzer: TextAnalyzer,
    /// `en_stem` with the query stop words removed before stemming.
    query_analyzer: TextAnalyzer,
    /// The documents of recently searched scopes, whose BM25 statistics a search uses.
    scopes: ScopeCache,
    /// Where a deletion announced and not yet applied here is marked (beside the index
    /// directory; `None` for an index in memory).
    deletion_mark: Option<PathBuf>,
}

const WRITER_MEMORY: usize = 50_000_000;

/// Words a query is searched without: Snowball's English stop words, the list PostgreSQL's
/// `english` text search configuration uses, so both backends' BM25 see the same query words.
/// Documents keep theirs (only the query is filtered), so no index needs rebuilding.
const QUERY_STOP_WORDS: &[&str] = &[
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "will",
    "just",
    "don",
    "should",
    "now",
];

impl LexicalIndex {
    /// Opens the index in `dir`, creating it when absent and starting it over, empty, when an
    /// older aril built it with another layout.
    pub fn open(dir: &Path) -> Result<Self, IndexError> {
        let open_err = |reason: String| IndexError::Open {
            path: dir.display().to_string(),
            reason,
        };
        let open_directory = || {
            std::fs::create_dir_all(dir).map_err(|e| open_err(e.to_string()))?;
            tantivy::directory::MmapDirectory::open(dir).map_err(|e| open_err(e.to_string()))
        };
        let directory = open_directory()?;
        let (schema, fields) = Self::schema();
        let mark = Some(dir.with_extension("deleting"));
        if !Index::exists(&directory).map_err(|e| open_err(e.to_string()))? {
            return Self::with_index(
                Index::create(directory, schema, Default::default())?,
                fields,
                mark,
            );
        }
        let index = Index::open(directory)?;
        if index.schema() == schema {
            return Self::with_index(index, fields, mark);
        }
        // Derived data: an index of an older layout is dropped, and the engine, finding no
        // watermark, builds it again from the store.
        tracing::info!(
            "the lexical index at {} has an older layout: rebuilding it",
            dir.display()
        );
        drop(index);
        std::fs::remove_dir_all(dir).map_err(|e| open_err(e.to_string()))?;
        Self::with_index(
            Index::create(open_directory()?, schema, Default::default())?,
            fields,
            mark,
        )
    }

    /// An index held in memory only, for units derived on demand (a user's cards).
    pub fn in_memory() -> Result<Self, IndexError> {
        let (schema, fields) = Self::schema();
        Self::with_index(Index::create_in_ram(schema), fields, None)
    }

    fn with_index(
        index: Index,
        fields: Fields,
        deletion_mark: Option<PathBuf>,
    ) -> Result<Self, IndexError> {
        let writer = index.writer_with_num_threads(1, WRITER_MEMORY)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let word_analyzer = en_stem(&[]);
        let query_analyzer = en_stem(QUERY_STOP_WORDS);
        Ok(Self {
            index,
            reader,
            writer: Mutex::new(writer),
            fields,
            word_analyzer,
            query_analyzer,
            scopes: ScopeCache::default(),
            deletion_mark,
        })
    }

    /// Marks that a deletion is about to reach the store and is not yet applied here (written
    /// durably, before the store deletes): an index opened with the mark still there may hold
    /// units the store no longer has.
    pub fn mark_deleting(&self) -> Result<(), IndexError> {
        let Some(mark) = &self.deletion_mark else {
            return Ok(());
        };
        let io = |e: std::io::Error| IndexError::Open {
            path: mark.display().to_string(),
            reason: format!("writing the deletion mark: {e}"),
        };
        std::fs::File::create(mark)
            .and_then(|f| f.sync_all())
            .map_err(io)?;
        if let Some(parent) = mark.parent() {
            std::fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(io)?;
        }
        Ok(())
    }

    /// Whether a deletion was marked and not cleared: one interrupted, or one the store refused.
    pub fn deletion_marked(&self) -> bool {
        self.deletion_mark.as_ref().is_some_and(|m| m.exists())
    }

    /// Clears the mark: the deletion is applied here too (or did not happen).
    pub fn clear_deletion_mark(&self) -> Result<(), IndexError> {
        match &self.deletion_mark {
            Some(mark) => match std::fs::remove_file(mark) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(IndexError::Open {
                    path: mark.display().to_string(),
                    reason: format!("removing the deletion mark: {e}"),
                }),
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }

    fn schema() -> (Schema, Fields) {
        let mut builder = Schema::builder();
        // Words arrive tokenized ([`LexicalIndex::words`]); BM25 needs no positions.
        let words_options = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("raw")
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let fields = Fields {
            id: builder.add_text_field("id", STRING | STORED),
            kind: builder.add_text_field("kind", STRING | STORED),
            user: builder.add_text_field("user", STRING),
            agent: builder.add_text_field("agent", STRING),
            run: builder.add_text_field("run", STRING),
            role: builder.add_text_field("role", STRING),
            namespace: builder.add_text_field("namespace", STRING),
            words: builder.add_text_field("words", words_options),
        };
        (builder.build(), fields)
    }

    /// What the last commit covered.
    pub fn watermark(&self) -> Result<Watermark, IndexError> {
        let metas = self.index.load_metas()?;
        match metas.payload {
            None => Ok(Watermark::default()),
            Some(p) => serde_json::from_str(&p)
                .map_err(|e| IndexError::Corrupt(format!("commit payload {p:?}: {e}"))),
        }
    }

    /// Number of indexed units.
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds units and commits, recording the new watermark. A window unit replaces the window
    /// indexed for its turn before (a turn's window grows as its session goes on). Searches go
    /// on meanwhile and see the units once committed.
    pub fn add(&self, units: &[UnitText], watermark: Watermark) -> Result<(), IndexError> {
        let f = &self.fields;
        let mut writer = self.writer();
        for u in units {
            if u.kind == UnitKind::Window {
                let same = |field, value: &str| -> (Occur, Box<dyn Query>) {
                    (
                        Occur::Must,
                        Box::new(TermQuery::new(
                            Term::from_field_text(field, value),
                            IndexRecordOption::Basic,
                        )),
                    )
                };
                writer.delete_query(Box::new(BooleanQuery::new(vec![
                    same(f.id, &u.id),
                    same(f.kind, UnitKind::Window.as_str()),
                ])))?;
            }
            let mut doc = TantivyDocument::default();
            doc.add_text(f.id, &u.id);
            doc.add_text(f.kind, u.kind.as_str());
            doc.add_text(f.user, &u.scope.user_id);
            doc.add_text(f.agent, u.scope.agent_id.as_deref().unwrap_or(""));
            doc.add_text(f.run, u.scope.run_id.as_deref().unwrap_or(""));
            if let Some(role) = u.role {
                doc.add_text(f.role, role.as_str());
            }
            let namespace = Namespace::of(&u.scope.user_id, u.kind, u.role);
            doc.add_text(f.namespace, namespace.as_str());
            doc.add_pre_tokenized_text(f.words, self.words(&namespace, &u.text));
            writer.add_document(doc)?;
        }
        self.commit(&mut writer, watermark)
    }

    /// `text`'s words under `namespace`, as the index takes them.
    fn words(&self, namespace: &Namespace, text: &str) -> PreTokenizedString {
        let mut analyzer = self.word_analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        let mut tokens = Vec::new();
        while stream.advance() {
            let token = stream.token();
            tokens.push(Token {
                text: namespace.word(&token.text),
                ..token.clone()
            });
        }
        PreTokenizedString {
            text: String::new(),
            tokens,
        }
    }

    fn writer(&self) -> MutexGuard<'_, IndexWriter> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn commit(&self, writer: &mut IndexWriter, watermark: Watermark) -> Result<(), IndexError> {
        let payload =
            serde_json::to_string(&watermark).map_err(|e| IndexError::Corrupt(e.to_string()))?;
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        self.reader.reload()?;
        Ok(())
    }

    /// Removes every unit a filter admits, commits, and merges away the deleted documents.
    pub fn delete(&mut self, filter: &ScopeFilter) -> Result<(), IndexError> {
        let watermark = self.watermark()?;
        let mut writer = self.writer();
        writer.delete_query(self.filter_query(filter))?;
        self.commit(&mut writer, watermark)?;
        self.merge_all(&mut writer)
    }

    /// Removes the units with these ids, commits, and merges away the deleted documents.
    pub fn delete_units(&mut self, ids: &[&str]) -> Result<(), IndexError> {
        let watermark = self.watermark()?;
        let mut writer = self.writer();
        for id in ids {
            writer.delete_term(Term::from_field_text(self.fields.id, id));
        }
        self.commit(&mut writer, watermark)?;
        self.merge_all(&mut writer)
    }

    /// Empties the index (before a rebuild).
    pub fn clear(&mut self) -> Result<(), IndexError> {
        let mut writer = self.writer();
        writer.delete_all_documents()?;
        self.commit(&mut writer, Watermark::default())?;
        self.merge_all(&mut writer)
    }

    /// Merges all segments into one, which drops deleted documents from disk, then collects
    /// garbage.
    fn merge_all(&self, writer: &mut IndexWriter) -> Result<(), IndexError> {
        let ids = self.index.searchable_segment_ids()?;
        let has_deletes = self
            .reader
            .searcher()
            .segment_readers()
            .iter()
            .any(|s| s.num_deleted_docs() > 0);
        if !ids.is_empty() && (ids.len() > 1 || has_deletes) {
            writer.merge(&ids).wait()?;
        }
        writer.garbage_collect_files().wait()?;
        self.reader.reload()?;
        Ok(())
    }

    fn filter_query(&self, filter: &ScopeFilter) -> Box<dyn Query> {
        let f = &self.fields;
        let term = |field, value: &str| -> (Occur, Box<dyn Query>) {
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(field, value),
                    IndexRecordOption::Basic,
                )),
            )
        };
        let mut clauses = vec![term(f.user, &filter.user_id)];
        if let Some(a) = &filter.agent_id {
            clauses.push(term(f.agent, a));
        }
        if let Some(r) = &filter.run_id {
            clauses.push(term(f.run, r));
        }
        Box::new(BooleanQuery::new(clauses))
    }

    /// The `k` best units of `kinds` for `query` by BM25 inside the filter. With `roles`, only
    /// units of turns of those roles are returned (segments and cards have none); the BM25
    /// statistics still come from every unit of the filter and kinds. An empty or
    /// stop-word-only query finds nothing.
    pub fn search(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
        kinds: &[UnitKind],
        roles: Option<&[Role]>,
    ) -> Result<Vec<Hit>, IndexError> {
        let f = &self.fields;
        let mut analyzer = self.query_analyzer.clone();
        let mut stream = analyzer.token_stream(query);
        let mut words: Vec<String> = Vec::new();
        while stream.advance() {
            let token = &stream.token().text;
            if !words.contains(token) {
                words.push(token.clone());
            }
        }
        if words.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        // The units whose statistics the scores use: the search's scope, of its kinds, with any
        // role; of those, the units it returns: the namespaces of `roles`.
        let counted = Namespace::all(&filter.user_id, kinds, None);
        let returned = Namespace::all(&filter.user_id, kinds, roles);
        let narrowed = filter.narrowed();
        let in_namespaces = any_of(f.namespace, counted.iter().map(Namespace::as_str));
        let units: Box<dyn Query> = match narrowed {
            true => Box::new(BooleanQuery::new(vec![
                (Occur::Must, self.filter_query(filter)),
                (Occur::Must, in_namespaces),
            ])),
            false => in_namespaces,
        };
        let searcher = self.reader.searcher();
        let key = (filter.clone(), kinds.to_vec());
        let docs = self.scopes.get(&searcher, &key, units.as_ref(), f.words)?;
        if docs.is_empty() || returned.is_empty() {
            return Ok(Vec::new());
        }
        let stats = ScopeStats {
            searcher: &searcher,
            docs: &docs,
            namespaces: &counted,
            words: f.words,
            counted: Default::default(),
        };
        let words = rarest(words, BM25_QUERY_WORDS, |w| stats.units_holding(w))?;
        let terms: Vec<(Occur, Box<dyn Query>)> = returned
            .iter()
            .flat_map(|ns| words.iter().map(move |w| ns.word(w)))
            .map(|term| -> (Occur, Box<dyn Query>) {
                (
                    Occur::Should,
                    Box::new(TermQuery::new(
                        Term::from_field_text(f.words, &term),
                        IndexRecordOption::WithFreqs,
                    )),
                )
            })
            .collect();
        // A union of term queries alone is what tantivy prunes with block-max WAND; a narrowed
        // filter is a condition beside it (adding nothing to the score).
        let query: Box<dyn Query> = match narrowed {
            false => Box::new(BooleanQuery::new(terms)),
            true => Box::new(BooleanQuery::new(vec![
                (
                    Occur::Must,
                    Box::new(BooleanQuery::new(terms)) as Box<dyn Query>,
                ),
                (
                    Occur::Must,
                    Box::new(ConstScoreQuery::new(self.filter_query(filter), 0.0)),
                ),
            ])),
        };
        // Equal scores are ordered by unit id, as the dense search and PostgreSQL order them, so
        // the result does not depend on how tantivy's segments happen to be laid out (a cold and
        // a warm index differ there): the units tied with the k-th all come, then the ids decide.
        let top = searcher.search_with_statistics_provider(
            query.as_ref(),
            &TopWithTies::new(k),
            &stats,
        )?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address)?;
            let text = |field| {
                doc.get_first(field)
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .ok_or_else(|| IndexError::Corrupt("a document lacks its id or kind".into()))
            };
            let kind = match text(f.kind)?.as_str() {
                "turn" => UnitKind::Turn,
                "segment" => UnitKind::Segment,
                "card" => UnitKind::Card,
                "window" => UnitKind::Window,
                other => return Err(IndexError::Corrupt(format!("unknown unit kind {other:?}"))),
            };
            hits.push(Hit {
                unit: UnitId::of(kind, text(f.id)?),
                score,
            });
        }
        hits.sort_by(Hit::ranking);
        hits.truncate(k);
        Ok(hits)
    }
}

/// The `max` of `words` that the fewest units hold, equal counts by the word itself
/// ([`BM25_QUERY_WORDS`]); all of them when there are no more than `max`. A word no unit
/// holds scores nothing and takes no place.
fn rarest(
    words: Vec<String>,
    max: usize,
    units_holding: impl Fn(&str) -> tantivy::Result<u64>,
) -> tantivy::Result<Vec<String>> {
    if words.len() <= max {
        return Ok(words);
    }
    let mut counted: Vec<(u64, String)> = Vec::with_capacity(words.len());
    for word in words {
        let n = units_holding(&word)?;
        if n > 0 {
            counted.push((n, word));
        }
    }
    counted.sort_unstable();
    Ok(counted.into_iter().take(max).map(|(_, w)| w).collect())
}

/// tantivy's `en_stem` (words split on what is not alphanumeric, those over 40 bytes dropped,
/// lowercased, English Snowball stems) with `stop_words` removed before stemming.
fn en_stem(stop_words: &[&str]) -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            stop_words.iter().map(|w| w.to_string()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// A query for the documents whose `field` holds any of `values`.
fn any_of<'a>(field: Field, values: impl Iterator<Item = &'a str>) -> Box<dyn Query> {
    let clauses = values
        .map(|value| -> (Occur, Box<dyn Query>) {
            (
                Occur::Should,
                Box::new(TermQuery::new(
                    Term::from_field_text(field, value),
                    IndexRecordOption::Basic,
                )),
            )
        })
        .collect();
    Box::new(BooleanQuery::new(clauses))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aril_core::Scope;

    fn unit(id: &str, user: &str, text: &str, seq: i64) -> UnitText {
        UnitText {
            kind: UnitKind::Turn,
            id: id.into(),
            scope: Scope::user(user).unwrap(),
            text: text.into(),
            seq,
            role: Some(Role::User),
        }
    }

    #[test]
    fn a_long_question_is_searched_by_its_rarest_words() {
        // Word i is held by i + 1 units of 40: the first BM25_QUERY_WORDS are the rarest.
        let vocabulary = [
            "zebra", "piano", "violin", "tennis", "coffee", "garden", "river", "mountain", "lake",
            "house", "bridge", "castle", "forest", "desert",
        ];
        assert!(vocabulary.len() > BM25_QUERY_WORDS);
        let dir = tempfile::tempdir().unwrap();
        let idx = LexicalIndex::open(dir.path()).unwrap();
        let units: Vec<UnitText> = (0..40)
            .map(|n| {
                let text: Vec<&str> = vocabulary
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| (n * 7 + i * 3) % 40 <= *i)
                    .map(|(_, w)| *w)
                    .collect();
                unit(
                    &format!("t{n:02}"),
                    "u1",
                    &format!("note {}", text.join(" ")),
                    n as i64 + 1,
                )
            })
            .collect();
        idx.add(&units, watermark(40)).unwrap();
        let search = |query: &str| {
            idx.search(&ScopeFilter::user("u1"), query, 40, &[UnitKind::Turn], None)
                .unwrap()
        };
        // "unheard" is held by no unit: it takes no place among the words searched.
        let whole = search(&format!("unheard {}", vocabulary.join(" ")));
        let rarest = search(&vocabulary[..BM25_QUERY_WORDS].join(" "));
        assert!(!whole.is_empty());
        assert_eq!(whole, rarest);
        // A question of few words is searched whole: the commonest word still counts.
        let short = search("zebra desert");
        assert_ne!(short, search("zebra"));
    }

    #[test]
    fn the_rarest_words_skip_the_absent_and_break_ties_by_the_word() {
        let held = |w: &str| -> tantivy::Result<u64> {
            Ok(match w {
                "absent" => 0,
                "common" => 50,
                _ => 3,
            })
        };
        let words = |ws: &[&str]| ws.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let kept = rarest(
            words(&["common", "pear", "absent", "apple", "fig"]),
            3,
            held,
        )
        .unwrap();
        assert_eq!(kept, words(&["apple", "fig", "pear"]));
        // No more words than the limit: all of them, as asked.
        let few = rarest(words(&["common", "absent"]), 3, held).unwrap();
        assert_eq!(few, words(&["common", "absent"]));
    }

    #[test]
    fn finds_by_stemmed_words_inside_the_scope_only() {
        let dir = tempfile::tempdir().unwrap();
        let idx = LexicalIndex::open(dir.path()).unwrap();
        idx.add(
            &[
                unit("a", "u1", "Melanie painted a lake sunrise", 1),
                unit("b", "u1", "Caroline went hiking", 2),
                unit("c", "u2", "Someone paints sunrises too", 3),
            ],
            Watermark {
                turn_seq: 3,
                segment_seq: 0,
                windows: false,
            },
        )
        .unwrap();
        let hits = idx
            .search(
                &ScopeFilter::user("u1"),
                "paintings of a sunrise",
                10,
                &[UnitKind::Turn],
                None,
            )
            .unwrap();
        assert_eq!(
            hits.iter().map(|h| h.unit.as_str()).collect::<Vec<_>>(),
            vec!["a"]
        );
        assert!(
            idx.search(&ScopeFilter::user("u1"), "", 10, &[UnitKind::Turn], None)
                .unwrap()
                .is_empty()
        );
        assert!(
            idx.search(
                &ScopeFilter::user("u1"),
                "sunrise",
                10,
                &[UnitKind::Segment],
                None
            )
            .unwrap()
            .is_empty()
        );
        assert_eq!(idx.watermark().unwrap().turn_seq, 3);
    }

    #[test]
    fn query_stop_words_do_not_rank_and_a_stop_word_query_finds_nothing() {
        let idx = LexicalIndex::in_memory().unwrap();
        idx.add(
            &[
                unit(
                    "chatter",
                    "u",
                    "what was it that they did there, and what was it for",
                    1,
                ),
                unit("dog", "u", "Our dog is called Rex", 2),
            ],
            Watermark::default(),
        )
        .unwrap();
        // "what", "was", "did", "the" match the chatter many times; only "dog" ranks.
        let hits = idx
            .search(
                &ScopeFilter::user("u"),
                "what was the dog called and what did it do",
                10,
                &[UnitKind::Turn],
                None,
            )
            .unwrap();
        assert_eq!(
            hits.iter().map(|h| h.unit.as_str()).collect::<Vec<_>>(),
            vec!["dog"]
        );
        assert!(
            idx.search(
                &ScopeFilter::user("u"),
                "what was it",
                10,
                &[UnitKind::Turn],
                None
            )
            .unwrap()
            .is_empty()
        );
    }

    #[test]
    fn delete_removes_one_scope_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut idx = LexicalIndex::open(dir.path()).unwrap();
            idx.add(
                &[unit("a", "u1", "zebra", 1)],
                Watermark {
                    turn_seq: 1,
                    segment_seq: 0,
                    windows: false,
                },
            )
            .unwrap();
            idx.add(
                &[unit("b", "u2", "zebra", 2)],
                Watermark {
                    turn_seq: 2,
                    segment_seq: 0,
                    windows: false,
                },
            )
            .unwrap();
            idx.delete(&ScopeFilter::user("u1")).unwrap();
        }
        let idx = LexicalIndex::open(dir.path()).unwrap();
        assert_eq!(idx.len(), 1);
        assert!(scores(&idx, "u1", "zebra", UnitKind::Turn).is_empty());
        assert_eq!(scores(&idx, "u2", "zebra", UnitKind::Turn).len(), 1);
        assert_eq!(idx.watermark().unwrap().turn_seq, 2);
    }

    #[test]
    fn delete_units_removes_only_those_ids() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = LexicalIndex::open(dir.path()).unwrap();
        idx.add(
            &[unit("a", "u1", "zebra", 1), unit("b", "u1", "zebra", 2)],
            Watermark {
                turn_seq: 2,
                segment_seq: 0,
                windows: false,
            },
        )
        .unwrap();
        idx.delete_units(&["a"]).unwrap();
        let hits = idx
            .search(
                &ScopeFilter::user("u1"),
                "zebra",
                5,
                &[UnitKind::Turn],
                None,
            )
            .unwrap();
        assert_eq!(
            hits.iter().map(|h| h.unit.as_str()).collect::<Vec<_>>(),
            ["b"]
        );
        assert_eq!(idx.watermark().unwrap().turn_seq, 2);
    }

    fn watermark(turn_seq: i64) -> Watermark {
        Watermark {
            turn_seq,
            segment_seq: 0,
            windows: true,
        }
    }

    /// A fresh index holding `units` (its directory lives as long as the index is used).
    fn index_of(units: &[UnitText]) -> (tempfile::TempDir, LexicalIndex) {
        let dir = tempfile::tempdir().unwrap();
        let idx = LexicalIndex::open(dir.path()).unwrap();
        idx.add(units, watermark(units.len() as i64)).unwrap();
        (dir, idx)
    }

    fn window(id: &str, text: &str, seq: i64) -> UnitText {
        UnitText {
            kind: UnitKind::Window,
            ..unit(id, "u1", text, seq)
        }
    }

    fn scores(idx: &LexicalIndex, user: &str, query: &str, kind: UnitKind) -> Vec<(String, f32)> {
        idx.search(&ScopeFilter::user(user), query, 10, &[kind], None)
            .unwrap()
            .into_iter()
            .map(|h| (h.unit.as_str().to_string(), h.score))
            .collect()
    }

    #[test]
    fn bm25_statistics_come_from_the_searched_scope_and_kind_alone() {
        let turns = [
            unit("a", "u1", "zebra lake", 1),
            unit("b", "u1", "lake house", 2),
            unit("c", "u1", "mountain", 3),
        ];
        let (_dir, idx) = index_of(&turns);
        // BM25 over u1's three turns: N 3, mean length 5/3, "zebra" in one of them.
        let idf = (1.0f32 + (3.0 - 1.0 + 0.5) / (1.0 + 0.5)).ln();
        let expected = idf * 2.2 / (1.0 + 1.2 * (0.25 + 0.75 * 2.0 / (5.0 / 3.0)));
        let before = scores(&idx, "u1", "zebra", UnitKind::Turn);
        assert_eq!(before.len(), 1);
        assert!(
            (before[0].1 - expected).abs() < 1e-4,
            "{before:?} against {expected}"
        );

        // Another user's turns and u1's own segments and windows, all full of the word, change
        // nothing for u1's turns.
        let mut more: Vec<UnitText> = (0..20)
            .map(|i| unit(&format!("x{i}"), "u2", "zebra zebra lake", 4 + i))
            .collect();
        more.push(UnitText {
            kind: UnitKind::Segment,
            ..unit("s", "u1", "zebra lake lake house mountain zebra", 30)
        });
        more.push(window("a", "zebra lake lake house", 31));
        idx.add(&more, watermark(31)).unwrap();
        let (_fresh_dir, fresh) = index_of(&turns);
        assert_eq!(
            scores(&idx, "u1", "zebra lake", UnitKind::Turn),
            scores(&fresh, "u1", "zebra lake", UnitKind::Turn)
        );
        assert_eq!(scores(&idx, "u1", "zebra", UnitKind::Turn), before);

        // A window replaced three times scores as the last one alone would: the replaced
        // documents, deleted but not merged away, are not counted.
        for (i, text) in ["zebra", "zebra lake", "zebra lake house"]
            .iter()
            .enumerate()
        {
            let seq = 40 + i as i64;
            idx.add(&[window("b", text, seq)], watermark(seq)).unwrap();
        }
        let windows = scores(&idx, "u1", "zebra house", UnitKind::Window);
        let (_fresh_dir, fresh) = index_of(&[
            window("a", "zebra lake lake house", 1),
            window("b", "zebra lake house", 2),
        ]);
        assert_eq!(
            windows,
            scores(&fresh, "u1", "zebra house", UnitKind::Window)
        );
        assert_eq!(windows.len(), 2);
    }

    #[test]
    fn equal_scores_are_ordered_by_id_whatever_the_segments() {
        // Four units that score the same, written in reverse id order, one commit each (so
        // one tantivy segment each), beside one that scores higher.
        let dir = tempfile::tempdir().unwrap();
        let idx = LexicalIndex::open(dir.path()).unwrap();
        for (seq, id) in ["d", "c", "b", "a"].iter().enumerate() {
            let seq = seq as i64 + 1;
            idx.add(&[unit(id, "u1", "lake house", seq)], watermark(seq))
                .unwrap();
        }
        idx.add(&[unit("z", "u1", "lake lake", 5)], watermark(5))
            .unwrap();
        let top = |k| -> Vec<String> {
            idx.search(&ScopeFilter::user("u1"), "lake", k, &[UnitKind::Turn], None)
                .unwrap()
                .into_iter()
                .map(|h| h.unit.as_str().to_string())
                .collect()
        };
        assert_eq!(top(1), ["z"]);
        // A cut inside the tie keeps the smallest ids.
        assert_eq!(top(3), ["z", "a", "b"]);
        assert_eq!(top(10), ["z", "a", "b", "c", "d"]);
    }

    #[test]
    fn a_role_restriction_returns_those_roles_turns_scored_as_among_all() {
        let reply = UnitText {
            role: Some(Role::Assistant),
            ..unit("b", "u1", "zebra zebra zebra", 2)
        };
        let segment = UnitText {
            kind: UnitKind::Segment,
            role: None,
            ..unit("s", "u1", "zebra lake", 4)
        };
        let (_dir, idx) = index_of(&[
            unit("a", "u1", "zebra lake", 1),
            reply,
            unit("c", "u1", "mountain", 3),
            segment,
        ]);
        let find = |kinds: &[UnitKind], roles: Option<&[Role]>| -> Vec<(String, f32)> {
            idx.search(&ScopeFilter::user("u1"), "zebra", 10, kinds, roles)
                .unwrap()
                .into_iter()
                .map(|h| (h.unit.as_str().to_string(), h.score))
                .collect()
        };
        let every = find(&[UnitKind::Turn], None);
        assert_eq!(
            every.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(),
            ["b", "a"]
        );
        // The reply is not returned, and "a" keeps the score the reply's statistics gave it.
        assert_eq!(
            find(&[UnitKind::Turn], Some(&[Role::User])),
            vec![every[1].clone()]
        );
        assert_eq!(find(&[UnitKind::Segment], None).len(), 1);
        assert!(find(&[UnitKind::Segment], Some(&[Role::User])).is_empty());
    }

    #[test]
    fn a_filter_narrowed_to_an_agent_scores_over_that_agents_units_alone() {
        let of_agent = |id: &str, agent: &str, text: &str, seq: i64| UnitText {
            scope: Scope::new("u1".into(), Some(agent.to_string()), None).unwrap(),
            ..unit(id, "u1", text, seq)
        };
        let mine = [
            of_agent("a", "a1", "zebra lake", 1),
            of_agent("b", "a1", "lake house", 2),
        ];
        let mut all = mine.to_vec();
        all.extend((0..10).map(|i| of_agent(&format!("x{i}"), "a2", "zebra zebra", 3 + i)));
        let (_dir, idx) = index_of(&all);
        let (_fresh_dir, fresh) = index_of(&mine);
        let narrowed = ScopeFilter {
            agent_id: Some("a1".into()),
            ..ScopeFilter::user("u1")
        };
        let found = |idx: &LexicalIndex, filter: &ScopeFilter| -> Vec<(String, f32)> {
            idx.search(filter, "zebra lake", 10, &[UnitKind::Turn], None)
                .unwrap()
                .into_iter()
                .map(|h| (h.unit.as_str().to_string(), h.score))
                .collect()
        };
        let theirs = found(&idx, &narrowed);
        assert_eq!(
            theirs.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(theirs, found(&fresh, &ScopeFilter::user("u1")));
    }

    #[test]
    fn the_pruned_top_k_is_the_top_of_every_match_scored() {
        // Enough units over several segments for block-max WAND to skip blocks.
        let vocabulary = [
            "lake", "zebra", "house", "mountain", "river", "garden", "piano", "violin", "tennis",
            "coffee",
        ];
        let dir = tempfile::tempdir().unwrap();
        let idx = LexicalIndex::open(dir.path()).unwrap();
        let mut seq = 0;
        for batch in 0..4 {
            let units: Vec<UnitText> = (0..1500)
                .map(|i| {
                    seq += 1;
                    let n = i * 7 + batch * 13;
                    let text: Vec<&str> = (0..1 + n % 9)
                        .map(|j| vocabulary[(n * (j + 3) + j * j) % vocabulary.len()])
                        .collect();
                    unit(&format!("t{seq:05}"), "u1", &text.join(" "), seq as i64)
                })
                .collect();
            idx.add(&units, watermark(seq as i64)).unwrap();
        }
        for query in ["zebra violin", "lake river coffee", "piano"] {
            let every = idx
                .search(
                    &ScopeFilter::user("u1"),
                    query,
                    6000,
                    &[UnitKind::Turn],
                    None,
                )
                .unwrap();
            assert!(every.len() > 100, "{query}: {} matches", every.len());
            for k in [1, 10, 50] {
                let top = idx
                    .search(&ScopeFilter::user("u1"), query, k, &[UnitKind::Turn], None)
                    .unwrap();
                assert_eq!(top, every[..k], "{query} at k {k}");
            }
        }
    }

    #[test]
    fn an_index_of_an_older_layout_starts_over_empty() {
        let dir = tempfile::tempdir().unwrap();
        {
            // The layout before roles: no role field.
            let mut builder = Schema::builder();
            let id = builder.add_text_field("id", STRING | STORED);
            let text = builder.add_text_field("text", tantivy::schema::TEXT);
            let index = Index::create_in_dir(dir.path(), builder.build()).unwrap();
            let mut writer: IndexWriter = index.writer_with_num_threads(1, WRITER_MEMORY).unwrap();
            let mut doc = TantivyDocument::default();
            doc.add_text(id, "old");
            doc.add_text(text, "zebra");
            writer.add_document(doc).unwrap();
            let mut prepared = writer.prepare_commit().unwrap();
            prepared.set_payload(&serde_json::to_string(&watermark(7)).unwrap());
            prepared.commit().unwrap();
        }
        let idx = LexicalIndex::open(dir.path()).unwrap();
        assert!(idx.is_empty());
        assert_eq!(idx.watermark().unwrap(), Watermark::default());
        idx.add(&[unit("a", "u1", "zebra lake", 1)], watermark(1))
            .unwrap();
        drop(idx);
        // Reopened with the current layout, it is kept.
        let idx = LexicalIndex::open(dir.path()).unwrap();
        assert_eq!(idx.len(), 1);
        assert_eq!(scores(&idx, "u1", "zebra", UnitKind::Turn).len(), 1);
    }
}
