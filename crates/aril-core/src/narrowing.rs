//! What a store can find a condition's memories by before it tests the condition itself: a span
//! of creation times (through an index of when turns were said) and metadata objects one of
//! which every admitted memory contains (through PostgreSQL's GIN index). A narrowing is never
//! narrower than what its condition admits; the condition is tested on what it finds.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::condition::list;
use crate::{Condition, Field, Metadata, Op};

/// A closed interval of time; an end that is `None` is open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeSpan {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

impl TimeSpan {
    /// Every time.
    pub const ALL: TimeSpan = TimeSpan {
        from: None,
        to: None,
    };

    /// Whether `at` is inside the span (both ends included).
    pub fn holds(&self, at: DateTime<Utc>) -> bool {
        self.from.is_none_or(|from| at >= from) && self.to.is_none_or(|to| at <= to)
    }

    /// The times inside both spans (possibly none: `from` after `to`).
    fn meet(self, other: TimeSpan) -> TimeSpan {
        TimeSpan {
            from: self.from.max(other.from),
            to: match (self.to, other.to) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// The smallest span holding both.
    fn join(self, other: TimeSpan) -> TimeSpan {
        TimeSpan {
            from: self.from.zip(other.from).map(|(a, b)| a.min(b)),
            to: self.to.zip(other.to).map(|(a, b)| a.max(b)),
        }
    }
}

/// What a store can find a condition's memories by before the condition itself is tested: the
/// span their creation times are in, and metadata objects one of which each admitted memory's
/// metadata contains (JSON containment, [`contains_json`]; `None`: the condition names none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Narrowing {
    pub created: TimeSpan,
    pub metadata_any_of: Option<Vec<Value>>,
}

impl Narrowing {
    /// Every memory.
    pub const ALL: Narrowing = Narrowing {
        created: TimeSpan::ALL,
        metadata_any_of: None,
    };

    /// Whether a memory created at `created_at` with `metadata` is inside.
    pub fn holds(&self, created_at: DateTime<Utc>, metadata: Option<&Metadata>) -> bool {
        self.created.holds(created_at)
            && self.metadata_any_of.as_ref().is_none_or(|shapes| {
                metadata.is_some_and(|m| {
                    shapes.iter().any(|shape| {
                        shape
                            .as_object()
                            .is_some_and(|shape| object_contains(m.as_map(), shape))
                    })
                })
            })
    }
}

/// JSON containment as PostgreSQL's `jsonb @>` tests it: an object holds each key of `part`
/// with a value containing the part's; an array holds, for each element of `part`, an element
/// containing it; other values are equal (numbers by value).
pub fn contains_json(whole: &Value, part: &Value) -> bool {
    match (whole, part) {
        (Value::Object(w), Value::Object(p)) => object_contains(w, p),
        (Value::Array(w), Value::Array(p)) => {
            p.iter().all(|pv| w.iter().any(|wv| contains_json(wv, pv)))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (w, p) => w == p,
    }
}

/// [`contains_json`] of two objects.
fn object_contains(
    whole: &serde_json::Map<String, Value>,
    part: &serde_json::Map<String, Value>,
) -> bool {
    part.iter()
        .all(|(k, pv)| whole.get(k).is_some_and(|wv| contains_json(wv, pv)))
}

impl Condition {
    /// A span of creation times outside of which the condition admits no memory (every time
    /// when it says nothing definite of `created_at`): what a store can find by an index before
    /// the condition itself is tested.
    fn created_span(&self) -> TimeSpan {
        match self {
            Condition::All(parts) => parts
                .iter()
                .fold(TimeSpan::ALL, |span, c| span.meet(c.created_span())),
            Condition::Any(parts) => parts
                .iter()
                .map(Condition::created_span)
                .reduce(TimeSpan::join)
                .unwrap_or(TimeSpan::ALL),
            Condition::Not(_) => TimeSpan::ALL,
            Condition::Test {
                field: Field::CreatedAt,
                op,
                operand,
            } => {
                let at = |v: &Value| {
                    v.as_str()
                        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                        .map(|t| t.with_timezone(&Utc))
                };
                match op {
                    Op::Eq => TimeSpan {
                        from: at(operand),
                        to: at(operand),
                    },
                    Op::Gt | Op::Gte => TimeSpan {
                        from: at(operand),
                        to: None,
                    },
                    Op::Lt | Op::Lte => TimeSpan {
                        from: None,
                        to: at(operand),
                    },
                    Op::In => {
                        let times: Option<Vec<_>> = list(operand).iter().map(at).collect();
                        let times = times.unwrap_or_default();
                        TimeSpan {
                            from: times.iter().min().copied(),
                            to: times.iter().max().copied(),
                        }
                    }
                    _ => TimeSpan::ALL,
                }
            }
            Condition::Test { .. } => TimeSpan::ALL,
        }
    }

    /// What a store can find the memories the condition admits by ([`Narrowing`]).
    pub fn narrowing(&self) -> Narrowing {
        Narrowing {
            created: self.created_span(),
            metadata_any_of: self.metadata_any_of(),
        }
    }

    /// Metadata objects one of which every memory the condition admits contains: from equality
    /// (`eq`, `in`, a literal) on a metadata key, through `AND` (its narrowest part) and `OR`
    /// (when each part has some). An operand compared by number is left out (a float's decimal
    /// text and its value differ), as is everything else.
    fn metadata_any_of(&self) -> Option<Vec<Value>> {
        match self {
            Condition::All(parts) => parts
                .iter()
                .filter_map(Condition::metadata_any_of)
                .min_by_key(Vec::len),
            Condition::Any(parts) => parts
                .iter()
                .map(Condition::metadata_any_of)
                .collect::<Option<Vec<_>>>()
                .map(|all| all.into_iter().flatten().collect()),
            Condition::Test {
                field: Field::Metadata(key),
                op: Op::Eq,
                operand,
            } => shapes(key, operand),
            Condition::Test {
                field: Field::Metadata(key),
                op: Op::In,
                operand,
            } => list(operand)
                .iter()
                .map(|v| shapes(key, v))
                .collect::<Option<Vec<_>>>()
                .map(|all| all.into_iter().flatten().collect()),
            _ => None,
        }
    }
}

/// The metadata objects holding `value` under `key` as a condition looks it up (the key itself, and
/// for a dotted key the nested path too); `None` for a value that equality compares by number
/// other than a small integer (its stored text may differ from its value).
fn shapes(key: &str, value: &Value) -> Option<Vec<Value>> {
    fn exact(v: &Value) -> bool {
        match v {
            Value::Number(n) => n.as_i64().is_some_and(|i| i.unsigned_abs() < 1 << 53),
            Value::Array(items) => items.iter().all(exact),
            Value::Object(map) => map.values().all(exact),
            _ => true,
        }
    }
    if !exact(value) {
        return None;
    }
    let mut shapes = vec![serde_json::json!({ key: value })];
    if key.contains('.') {
        let nested = key.rsplit('.').fold(
            value.clone(),
            |inner, part| serde_json::json!({ part: inner }),
        );
        shapes.push(nested);
    }
    Some(shapes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Subject;
    use serde_json::json;

    /// The span a condition gives holds every creation time it admits, and is as narrow as its
    /// `created_at` bounds say.
    #[test]
    fn the_created_span_holds_every_time_the_condition_admits() {
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let span = |filter: Value| Condition::from_mem0(&filter).unwrap().created_span();
        let week = span(
            json!({"created_at": {"gte": "2024-05-01", "lt": "2024-05-08"},
                                "category": "food"}),
        );
        assert_eq!(week.from, Some(t("2024-05-01T00:00:00Z")));
        assert_eq!(week.to, Some(t("2024-05-08T00:00:00Z")));
        let either = span(json!({"OR": [
            {"created_at": {"gte": "2024-05-01", "lte": "2024-05-02"}},
            {"created_at": {"in": ["2024-06-01", "2024-06-03"]}}
        ]}));
        assert_eq!(either.from, Some(t("2024-05-01T00:00:00Z")));
        assert_eq!(either.to, Some(t("2024-06-03T00:00:00Z")));
        // What a condition cannot bound stays open.
        assert_eq!(
            span(json!({"OR": [{"created_at": {"gte": "2024-05-01"}}, {"category": "food"}]})),
            TimeSpan::ALL
        );
        assert_eq!(
            span(json!({"NOT": {"created_at": {"lt": "2024-05-01"}}})),
            TimeSpan::ALL
        );
        assert_eq!(
            span(json!({"updated_at": {"gte": "2024-05-01"}})),
            TimeSpan::ALL
        );
        // Every time a condition admits is inside its span; the ends are included.
        let filters = [
            json!({"created_at": {"gt": "2024-05-01", "lte": "2024-05-03T12:00:00Z"}}),
            json!({"created_at": "2024-05-03T12:00:00Z"}),
            json!({"AND": [{"created_at": {"gte": "2024-05-02"}}, {"created_at": {"lt": "2024-05-04"}}]}),
        ];
        for filter in filters {
            let condition = Condition::from_mem0(&filter).unwrap();
            let span = condition.created_span();
            for hour in 0..24 * 6 {
                let at = t("2024-04-30T00:00:00Z") + chrono::Duration::hours(hour);
                let admitted = condition.admits(&Subject {
                    metadata: None,
                    created_at: at,
                    updated_at: at,
                });
                assert!(
                    !admitted || span.holds(at),
                    "{filter} admits {at} outside {span:?}"
                );
            }
            assert!(span.from.is_some() && span.to.is_some(), "{filter}");
        }
    }

    /// Equality on metadata narrows to the objects holding the value (the dotted key's nested
    /// path too), through AND and OR; what compares by order, by number or by negation does not.
    #[test]
    fn metadata_equality_narrows_to_the_objects_that_hold_it() {
        let any_of = |filter: Value| {
            Condition::from_mem0(&filter)
                .unwrap()
                .narrowing()
                .metadata_any_of
        };
        assert_eq!(
            any_of(json!({"category": "food"})),
            Some(vec![json!({"category": "food"})])
        );
        assert_eq!(
            any_of(json!({"category": {"in": ["food", 3]}})),
            Some(vec![json!({"category": "food"}), json!({"category": 3})])
        );
        assert_eq!(
            any_of(json!({"place.city": "Porto"})),
            Some(vec![
                json!({"place.city": "Porto"}),
                json!({"place": {"city": "Porto"}})
            ])
        );
        assert_eq!(
            any_of(
                json!({"AND": [{"kind": {"in": ["a", "b"]}}, {"lang": "pt"}, {"n": {"gt": 1}}]})
            ),
            Some(vec![json!({"lang": "pt"})])
        );
        assert_eq!(
            any_of(json!({"OR": [{"kind": "a"}, {"lang": "pt"}]})),
            Some(vec![json!({"kind": "a"}), json!({"lang": "pt"})])
        );
        for open in [
            json!({"OR": [{"kind": "a"}, {"n": {"gt": 1}}]}),
            json!({"score": 1.5}),
            json!({"kind": {"ne": "a"}}),
            json!({"NOT": {"kind": "a"}}),
            json!({"kind": "*"}),
            json!({"note": {"contains": "Thai"}}),
        ] {
            assert_eq!(any_of(open.clone()), None, "{open}");
        }
        assert!(contains_json(
            &json!({"tags": ["a", "b"], "n": 1.0, "o": {"x": 1, "y": 2}}),
            &json!({"tags": ["b"], "n": 1, "o": {"x": 1}})
        ));
        assert!(!contains_json(
            &json!({"tags": ["a"]}),
            &json!({"tags": "a"})
        ));
    }
}
