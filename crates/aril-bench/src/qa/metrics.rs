//! Answer metrics without a model: the token F1 and BLEU-1 Mem0's evaluation reports, and LoCoMo's
//! official per-category F1. Each function says which code it follows; `docs/benchmarks.md` has
//! the definitions.

use std::collections::{HashMap, HashSet};

use nltk_porter::{Mode, PorterStemmer};

/// Mem0 `evaluation/metrics/utils.py` `simple_tokenize`: lower case, `. , ! ?` become spaces,
/// split on whitespace.
fn mem0_tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .replace(['.', ',', '!', '?'], " ")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Mem0's token F1 (`calculate_metrics`): over the *sets* of [`mem0_tokens`] of the stripped
/// texts; 0 when either side is empty.
pub fn mem0_f1(prediction: &str, reference: &str) -> f64 {
    let pred: HashSet<String> = mem0_tokens(prediction.trim()).into_iter().collect();
    let gold: HashSet<String> = mem0_tokens(reference.trim()).into_iter().collect();
    if pred.is_empty() || gold.is_empty() {
        return 0.0;
    }
    let common = pred.intersection(&gold).count() as f64;
    if common == 0.0 {
        return 0.0;
    }
    let (p, r) = (common / pred.len() as f64, common / gold.len() as f64);
    2.0 * p * r / (p + r)
}

/// Tokens of `pred` matched in `gold`, each gold token used at most as often as it occurs (the
/// multiset intersection both BLEU's clipped counts and LoCoMo's F1 take).
fn clipped_matches(pred: &[String], gold: &[String]) -> usize {
    let mut available: HashMap<&str, usize> = HashMap::new();
    for t in gold {
        *available.entry(t.as_str()).or_default() += 1;
    }
    pred.iter()
        .filter(|t| match available.get_mut(t.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .count()
}

/// Contraction endings NLTK's Treebank tokenizer splits off a word.
const CONTRACTIONS: &[&str] = &["n't", "'s", "'re", "'ve", "'ll", "'d", "'m"];

/// An approximation of NLTK's `word_tokenize` on lower-cased text: punctuation marks become
/// tokens of their own, a word's final period is split off, and the contraction endings NLTK
/// separates (`n't`, `'s`, `'re`, ...) are split from their word. (NLTK keeps the periods of
/// abbreviations inside a sentence; this does not, a difference that only moves scores on answers
/// with such abbreviations.)
fn word_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.to_lowercase().split_whitespace() {
        let mut word = String::new();
        for c in raw.chars() {
            if matches!(
                c,
                ',' | ';' | ':' | '!' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '"'
            ) {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                out.push(c.to_string());
            } else {
                word.push(c);
            }
        }
        let mut tail = Vec::new();
        while word.len() > 1 && word.ends_with('.') {
            word.pop();
            tail.push(".".to_string());
        }
        if let Some(ending) = CONTRACTIONS
            .iter()
            .find(|e| word.len() > e.len() && word.ends_with(*e))
        {
            let stem = word[..word.len() - ending.len()].to_string();
            out.push(stem);
            out.push(ending.to_string());
        } else if !word.is_empty() {
            out.push(word);
        }
        out.extend(tail);
    }
    out
}

/// Mem0's BLEU-1 (`calculate_bleu_scores`, NLTK `sentence_bleu` with weights (1, 0, 0, 0) and
/// smoothing method 1): clipped unigram precision times the brevity penalty
/// exp(1 − |reference| / |prediction|) when the prediction is shorter; 0 when no unigram matches
/// (NLTK returns 0 then, before smoothing) or the prediction is empty.
pub fn mem0_bleu1(prediction: &str, reference: &str) -> f64 {
    let pred = word_tokens(prediction.trim());
    let gold = word_tokens(reference.trim());
    if pred.is_empty() || gold.is_empty() {
        return 0.0;
    }
    let matched = clipped_matches(&pred, &gold);
    if matched == 0 {
        return 0.0;
    }
    let precision = matched as f64 / pred.len() as f64;
    let (c, r) = (pred.len() as f64, gold.len() as f64);
    let brevity = if c > r { 1.0 } else { (1.0 - r / c).exp() };
    brevity * precision
}

/// LoCoMo `task_eval/evaluation.py` `normalize_answer`: commas dropped, lower case, ASCII
/// punctuation removed, the words a, an, the, and removed, whitespace collapsed.
fn locomo_normalize(text: &str) -> Vec<String> {
    let lowered: String = text
        .replace(',', "")
        .to_lowercase()
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    lowered
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the" | "and"))
        .map(str::to_string)
        .collect()
}

/// LoCoMo's `f1_score`: multiset F1 over Porter-stemmed (NLTK mode) normalized tokens.
fn locomo_token_f1(stemmer: &PorterStemmer, prediction: &str, reference: &str) -> f64 {
    let stem = |t: &str| -> Vec<String> {
        locomo_normalize(t)
            .iter()
            .map(|w| stemmer.stem(w))
            .collect()
    };
    let (pred, gold) = (stem(prediction), stem(reference));
    let same = clipped_matches(&pred, &gold);
    if same == 0 {
        return 0.0;
    }
    let (p, r) = (
        same as f64 / pred.len() as f64,
        same as f64 / gold.len() as f64,
    );
    2.0 * p * r / (p + r)
}

/// LoCoMo's official answer score for a question of `category` (`eval_question_answering`):
/// - 1 (multi-hop): prediction and gold split on commas; the mean over gold parts of the best F1
///   against any predicted part;
/// - 2, 3, 4: token F1, with a category-3 gold answer cut at its first `;`;
/// - 5 (adversarial): 1 when the prediction says "no information available" or "not mentioned".
pub fn locomo_f1(prediction: &str, reference: &str, category: u8) -> f64 {
    let stemmer = PorterStemmer::new(Mode::Nltk);
    match category {
        1 => {
            let preds: Vec<&str> = prediction.split(',').map(str::trim).collect();
            let golds: Vec<&str> = reference.split(',').map(str::trim).collect();
            let total: f64 = golds
                .iter()
                .map(|g| {
                    preds
                        .iter()
                        .map(|p| locomo_token_f1(&stemmer, p, g))
                        .fold(0.0, f64::max)
                })
                .sum();
            total / golds.len() as f64
        }
        5 => {
            let p = prediction.to_lowercase();
            if p.contains("no information available") || p.contains("not mentioned") {
                1.0
            } else {
                0.0
            }
        }
        3 => {
            let gold = reference.split(';').next().unwrap_or_default().trim();
            locomo_token_f1(&stemmer, prediction, gold)
        }
        _ => locomo_token_f1(&stemmer, prediction, reference),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn mem0_f1_uses_token_sets_and_its_four_punctuation_marks() {
        // {"she", "went", "to", "paris"} vs {"paris"}: p = 1/4, r = 1 → 0.4
        assert!(close(mem0_f1("She went to Paris.", "Paris"), 0.4));
        // Repeated tokens count once: {"paris"} vs {"paris"} → 1.
        assert!(close(mem0_f1("Paris, Paris!", "paris"), 1.0));
        // A colon is not one of the four marks: "time:" ≠ "time".
        assert!(close(mem0_f1("time:", "time"), 0.0));
        assert!(close(mem0_f1("", "x"), 0.0));
    }

    #[test]
    fn bleu1_clips_counts_and_penalises_short_answers() {
        // pred [the, cat, the, cat] vs gold [the, cat, sat]: clipped matches 2 of 4 → 0.5, no
        // brevity penalty (4 > 3).
        assert!(close(mem0_bleu1("the cat the cat", "the cat sat"), 0.5));
        // pred [paris] vs gold [in, paris, .]: precision 1, penalty exp(1 - 3/1).
        assert!(close(mem0_bleu1("Paris", "In Paris."), (-2f64).exp()));
        assert!(close(mem0_bleu1("London", "Paris"), 0.0));
        // Contractions split as NLTK does: [she, does, n't] ∩ [she, does] = 2 of 3.
        assert!(close(mem0_bleu1("She doesn't", "she does"), 2.0 / 3.0));
    }

    #[test]
    fn locomo_f1_stems_drops_articles_and_follows_each_category() {
        // "running" and "runs" stem to "run"; "the" and "and" are dropped.
        assert!(close(locomo_f1("The running", "runs", 4), 1.0));
        // Multiset: [cat, cat] vs [cat]: p = 1/2, r = 1 → 2/3.
        assert!(close(locomo_f1("cat cat", "cat", 2), 2.0 / 3.0));
        // Category 1: gold parts "hiking", "painting"; the prediction names one → mean (1 + 0) / 2.
        assert!(close(
            locomo_f1("hiking, chess", "hiking, painting", 1),
            0.5
        ));
        // Category 3: only the gold before ';' counts.
        assert!(close(
            locomo_f1("teacher", "teacher; likely a school", 3),
            1.0
        ));
        // Category 5: the refusal phrases, not the gold, decide.
        assert!(close(
            locomo_f1("That is not mentioned.", "anything", 5),
            1.0
        ));
        assert!(close(locomo_f1("Yes, in May.", "anything", 5), 0.0));
    }
}
