//! The BM25 rule both search backends keep for long questions: a question's words are searched
//! [`BM25_QUERY_WORDS`] at most, its rarest in the searched scope (the fewest units holding
//! them; equal counts by the word, a stemmed lexeme; words no unit holds take no place). A long question ("I wanted to follow up on
//! our previous conversation about … could you remind me …") carries conversational words
//! that many units hold: each adds little to a score (a low idf) and much to the work, since
//! a pruned top-k search must still walk the long postings of every word whose upper bound
//! could lift a unit over the threshold. Shorter questions are searched whole.

/// Words of a question searched by BM25 at most.
pub const BM25_QUERY_WORDS: usize = 12;
