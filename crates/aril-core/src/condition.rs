//! Conditions on memories beyond their scope: Mem0's filter language (`AND` / `OR` / `NOT` over
//! metadata keys and `created_at` / `updated_at`, with `eq`, `ne`, `in`, `nin`, `gt`, `gte`, `lt`,
//! `lte`, `contains`, `icontains` and the `*` wildcard), parsed once into a [`Condition`] that recall
//! and listings test each memory against.
//!
//! Scope keys (`user_id`, `agent_id`, `run_id`) parse as [`Field::Scope`] conditions: the adapters
//! lift them out of the top-level conjunction into the scope itself ([`Condition::take_scope`]),
//! and refuse them anywhere else (under `OR` or `NOT` they could widen a caller's reach).

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;

use crate::{InvalidInput, Metadata};

/// What a condition reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// A key of the memory's metadata (`{"metadata": {"key": …}}`, or a key of no other meaning).
    Metadata(String),
    /// When the memory was first said (`created_at`; `timestamp` is the same).
    CreatedAt,
    /// When its current version was written (`updated_at`).
    UpdatedAt,
    /// `user_id`, `agent_id` or `run_id`: not tested on memories, lifted into the scope.
    Scope(String),
}

/// How a field is compared with the operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    In,
    Nin,
    Gt,
    Gte,
    Lt,
    Lte,
    Contains,
    Icontains,
    /// `*`: the field exists, whatever its value.
    Exists,
}

/// A condition on a memory.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    All(Vec<Condition>),
    Any(Vec<Condition>),
    Not(Box<Condition>),
    Test {
        field: Field,
        op: Op,
        operand: Value,
    },
}

/// A filter split by [`Condition::take_scope`]: the scope it names and the condition left.
#[derive(Debug, Clone, PartialEq)]
pub struct Lifted {
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub run_id: Option<String>,
    /// What memories of the scope must meet (`None`: nothing more).
    pub rest: Option<Condition>,
}

/// What a condition is tested against: one memory as a listing or a recall sees it.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub metadata: Option<&'a Metadata>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const SCOPE_KEYS: [&str; 3] = ["user_id", "agent_id", "run_id"];

fn invalid(message: impl Into<String>) -> InvalidInput {
    InvalidInput(message.into())
}

impl Op {
    fn parse(name: &str) -> Result<Self, InvalidInput> {
        Ok(match name {
            "eq" => Op::Eq,
            "ne" => Op::Ne,
            "in" => Op::In,
            "nin" => Op::Nin,
            "gt" => Op::Gt,
            "gte" => Op::Gte,
            "lt" => Op::Lt,
            "lte" => Op::Lte,
            "contains" => Op::Contains,
            "icontains" => Op::Icontains,
            other => {
                return Err(invalid(format!(
                    "unknown filter operator {other:?}: use eq, ne, in, nin, gt, gte, lt, lte, \
                     contains or icontains (or \"*\" for any value)"
                )));
            }
        })
    }
}

impl Condition {
    /// Parses a Mem0 filter object: its keys are `AND` / `OR` (a list of filter objects), `NOT`
    /// (one filter object or a list of them, none of which may hold), `metadata` (an object of
    /// metadata keys), `created_at` / `updated_at` / `timestamp`, the scope keys, or metadata
    /// keys. A key's value is a literal (equality), `"*"` (exists) or an object of operators
    /// (all must hold). Several keys must all hold.
    pub fn from_mem0(filter: &Value) -> Result<Condition, InvalidInput> {
        let Value::Object(keys) = filter else {
            return Err(invalid("a filter must be a JSON object"));
        };
        let mut all = Vec::new();
        for (key, value) in keys {
            match key.as_str() {
                "AND" | "OR" => {
                    let Value::Array(items) = value else {
                        return Err(invalid(format!("{key} takes a list of filter objects")));
                    };
                    let parts = items
                        .iter()
                        .map(Condition::from_mem0)
                        .collect::<Result<Vec<_>, _>>()?;
                    all.push(if key == "AND" {
                        Condition::All(parts)
                    } else {
                        Condition::Any(parts)
                    });
                }
                "NOT" => {
                    let parts = match value {
                        Value::Array(items) => items
                            .iter()
                            .map(Condition::from_mem0)
                            .collect::<Result<Vec<_>, _>>()?,
                        other => vec![Condition::from_mem0(other)?],
                    };
                    all.push(Condition::Not(Box::new(Condition::Any(parts))));
                }
                "metadata" => {
                    let Value::Object(inner) = value else {
                        return Err(invalid("`metadata` takes an object of metadata keys"));
                    };
                    for (name, value) in inner {
                        all.push(tests(Field::Metadata(name.clone()), value)?);
                    }
                }
                "created_at" | "timestamp" => all.push(tests(Field::CreatedAt, value)?),
                "updated_at" => all.push(tests(Field::UpdatedAt, value)?),
                "categories" | "keywords" | "app_id" | "org_id" | "project_id" => {
                    return Err(invalid(format!(
                        "aril cannot filter on {key:?}: filter on metadata keys, created_at or \
                         updated_at"
                    )));
                }
                scope if SCOPE_KEYS.contains(&scope) => {
                    all.push(tests(Field::Scope(scope.to_string()), value)?);
                }
                name => all.push(tests(Field::Metadata(name.to_string()), value)?),
            }
        }
        Ok(match all.len() {
            1 => all.remove(0),
            _ => Condition::All(all),
        })
    }

    /// Takes the scope keys out of the top-level conjunction (`{"user_id": …}` beside other keys,
    /// or inside a top-level `AND`), each as its name and the string it must equal; returns them
    /// with what remains (`None`: nothing). A scope key anywhere else, or compared otherwise than
    /// by equality with a string, is an error.
    pub fn take_scope(self) -> Result<Lifted, InvalidInput> {
        let mut scope = Vec::new();
        let rest = lift_scope(self, &mut scope)?;
        if let Some(rest) = &rest {
            rest.refuse_scope()?;
        }
        let named = |key: &str| {
            scope
                .iter()
                .find(|(name, _)| name == key)
                .map(|(_, v)| v.clone())
        };
        Ok(Lifted {
            user_id: named("user_id"),
            agent_id: named("agent_id"),
            run_id: named("run_id"),
            rest,
        })
    }

    /// A filter for callers that name the scope apart (arguments, flags): a scope key in it is
    /// refused. `None` when it sets no condition.
    pub fn unscoped(filter: &Value) -> Result<Option<Condition>, InvalidInput> {
        let lifted = Condition::from_mem0(filter)?.take_scope()?;
        if lifted.user_id.is_some() || lifted.agent_id.is_some() || lifted.run_id.is_some() {
            return Err(invalid(
                "give user_id, agent_id and run_id apart from the filters, not in them",
            ));
        }
        Ok(lifted.rest)
    }

    fn refuse_scope(&self) -> Result<(), InvalidInput> {
        match self {
            Condition::All(parts) | Condition::Any(parts) => {
                parts.iter().try_for_each(Condition::refuse_scope)
            }
            Condition::Not(inner) => inner.refuse_scope(),
            Condition::Test {
                field: Field::Scope(name),
                ..
            } => Err(invalid(format!(
                "{name} may only be given at the top level of the filters or inside a top-level \
                 AND, as one value"
            ))),
            Condition::Test { .. } => Ok(()),
        }
    }

    /// Whether `subject` meets the condition.
    pub fn admits(&self, subject: &Subject<'_>) -> bool {
        match self {
            Condition::All(parts) => parts.iter().all(|c| c.admits(subject)),
            Condition::Any(parts) => parts.iter().any(|c| c.admits(subject)),
            Condition::Not(inner) => !inner.admits(subject),
            Condition::Test { field, op, operand } => {
                let owned;
                let value = match field {
                    Field::Metadata(key) => subject.metadata.and_then(|m| lookup(m, key)),
                    Field::CreatedAt => {
                        owned = Value::String(subject.created_at.to_rfc3339());
                        Some(&owned)
                    }
                    Field::UpdatedAt => {
                        owned = Value::String(subject.updated_at.to_rfc3339());
                        Some(&owned)
                    }
                    Field::Scope(_) => return true,
                };
                let time = matches!(field, Field::CreatedAt | Field::UpdatedAt);
                test(value, *op, operand, time)
            }
        }
    }
}

/// The value under a metadata key: the key itself, else a dotted path into nested objects
/// (`profile.city`).
fn lookup<'m>(metadata: &'m Metadata, key: &str) -> Option<&'m Value> {
    if let Some(v) = metadata.get(key) {
        return Some(v);
    }
    let mut parts = key.split('.');
    let mut at = metadata.get(parts.next()?)?;
    for part in parts {
        at = at.as_object()?.get(part)?;
    }
    Some(at)
}

/// The conditions one filter key's value sets on `field`.
fn tests(field: Field, value: &Value) -> Result<Condition, InvalidInput> {
    let time = matches!(field, Field::CreatedAt | Field::UpdatedAt);
    let test = |op: Op, operand: &Value| -> Result<Condition, InvalidInput> {
        check_operand(&field, op, operand, time)?;
        Ok(Condition::Test {
            field: field.clone(),
            op,
            operand: if time {
                normalised_times(operand)?
            } else {
                operand.clone()
            },
        })
    };
    match value {
        Value::String(s) if s == "*" => test(Op::Exists, &Value::Null),
        Value::Object(ops) if !ops.is_empty() => {
            let mut parts = ops
                .iter()
                .map(|(name, operand)| test(Op::parse(name)?, operand))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(match parts.len() {
                1 => parts.remove(0),
                _ => Condition::All(parts),
            })
        }
        Value::Object(_) => Err(invalid(format!(
            "the filter on {} is an empty object",
            field_name(&field)
        ))),
        literal => test(Op::Eq, literal),
    }
}

fn field_name(field: &Field) -> String {
    match field {
        Field::Metadata(k) | Field::Scope(k) => k.clone(),
        Field::CreatedAt => "created_at".into(),
        Field::UpdatedAt => "updated_at".into(),
    }
}

fn check_operand(field: &Field, op: Op, operand: &Value, time: bool) -> Result<(), InvalidInput> {
    let name = field_name(field);
    match op {
        Op::In | Op::Nin if !operand.is_array() => Err(invalid(format!(
            "the {op:?} filter on {name} takes a list of values",
            op = format!("{op:?}").to_lowercase()
        ))),
        Op::Contains | Op::Icontains if time => Err(invalid(format!(
            "{name} is a time: compare it with eq, ne, gt, gte, lt or lte"
        ))),
        Op::Icontains if !operand.is_string() => Err(invalid(format!(
            "the icontains filter on {name} takes a string"
        ))),
        _ if matches!(field, Field::Scope(_))
            && (op != Op::Eq || !(operand.is_string() || operand.is_null())) =>
        {
            Err(invalid(format!(
                "{name} in the filters takes one string (the scope): it has no operators"
            )))
        }
        _ => Ok(()),
    }
}

/// A time operand (RFC 3339, a date `YYYY-MM-DD`, or unix seconds; a list of them for `in`) as
/// RFC 3339 text in UTC, which then compares as it sorts.
fn normalised_times(operand: &Value) -> Result<Value, InvalidInput> {
    let one = |v: &Value| -> Result<Value, InvalidInput> {
        let at = match v {
            Value::String(s) => DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .ok()
                .or_else(|| {
                    NaiveDate::parse_from_str(s, "%Y-%m-%d")
                        .ok()
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                        .map(|t| t.and_utc())
                }),
            Value::Number(n) => n.as_i64().and_then(|s| DateTime::from_timestamp(s, 0)),
            _ => None,
        };
        at.map(|t| Value::String(t.to_rfc3339())).ok_or_else(|| {
            invalid(format!(
                "bad time {v}: use RFC 3339, a date YYYY-MM-DD or unix seconds"
            ))
        })
    };
    match operand {
        Value::Array(items) => Ok(Value::Array(
            items.iter().map(one).collect::<Result<_, _>>()?,
        )),
        other => one(other),
    }
}

/// Whether `value` (absent: `None`) stands in relation `op` to `operand`.
fn test(value: Option<&Value>, op: Op, operand: &Value, time: bool) -> bool {
    let Some(value) = value else {
        // An absent key differs from every value and is in no list.
        return matches!(op, Op::Ne | Op::Nin);
    };
    match op {
        Op::Exists => true,
        Op::Eq => same(value, operand, time),
        Op::Ne => !same(value, operand, time),
        Op::In => list(operand).iter().any(|o| same(value, o, time)),
        Op::Nin => !list(operand).iter().any(|o| same(value, o, time)),
        Op::Gt => order(value, operand, time).is_some_and(|o| o.is_gt()),
        Op::Gte => order(value, operand, time).is_some_and(|o| o.is_ge()),
        Op::Lt => order(value, operand, time).is_some_and(|o| o.is_lt()),
        Op::Lte => order(value, operand, time).is_some_and(|o| o.is_le()),
        Op::Contains => contains(value, operand, false),
        Op::Icontains => contains(value, operand, true),
    }
}

pub(crate) fn list(operand: &Value) -> &[Value] {
    operand.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Equality, with numbers compared as numbers (`1` equals `1.0`).
fn same(value: &Value, operand: &Value, time: bool) -> bool {
    match (value, operand) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ if time => order(value, operand, true).is_some_and(|o| o.is_eq()),
        _ => value == operand,
    }
}

/// The order of two numbers, two strings, or two times; `None` for values of different kinds.
fn order(value: &Value, operand: &Value, time: bool) -> Option<std::cmp::Ordering> {
    match (value, operand) {
        (Value::Number(a), Value::Number(b)) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        (Value::String(a), Value::String(b)) if time => {
            let at = |s: &str| DateTime::parse_from_rfc3339(s).ok();
            Some(at(a)?.cmp(&at(b)?))
        }
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// A string holding a substring, or a list holding an element (or, ignoring case, a string
/// element holding it).
fn contains(value: &Value, operand: &Value, ignore_case: bool) -> bool {
    let fold = |s: &str| {
        if ignore_case {
            s.to_lowercase()
        } else {
            s.to_string()
        }
    };
    match (value, operand) {
        (Value::String(s), Value::String(part)) => fold(s).contains(&fold(part)),
        (Value::Array(items), Value::String(part)) if ignore_case => items
            .iter()
            .filter_map(Value::as_str)
            .any(|s| fold(s).contains(&fold(part))),
        (Value::Array(items), operand) => items.iter().any(|item| same(item, operand, false)),
        _ => false,
    }
}

fn lift_scope(
    condition: Condition,
    scope: &mut Vec<(String, String)>,
) -> Result<Option<Condition>, InvalidInput> {
    match condition {
        Condition::Test {
            field: Field::Scope(name),
            op: Op::Eq,
            operand: Value::String(value),
        } => {
            if let Some((_, old)) = scope.iter().find(|(n, _)| *n == name)
                && *old != value
            {
                return Err(invalid(format!(
                    "{name} is given twice with different values"
                )));
            }
            scope.push((name, value));
            Ok(None)
        }
        // `{"agent_id": null}`: no value given, as when the key is left out.
        Condition::Test {
            field: Field::Scope(_),
            op: Op::Eq,
            operand: Value::Null,
        } => Ok(None),
        Condition::All(parts) => {
            let mut rest = Vec::new();
            for part in parts {
                if let Some(kept) = lift_scope(part, scope)? {
                    rest.push(kept);
                }
            }
            Ok(match rest.len() {
                0 => None,
                1 => rest.pop(),
                _ => Some(Condition::All(rest)),
            })
        }
        other => Ok(Some(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn memory(metadata: Value, created: &str) -> (Metadata, DateTime<Utc>) {
        let at = DateTime::parse_from_rfc3339(created)
            .unwrap()
            .with_timezone(&Utc);
        (Metadata::try_from(metadata).unwrap(), at)
    }

    fn admits(filter: Value, metadata: Value, created: &str) -> bool {
        let (metadata, at) = memory(metadata, created);
        let condition = Condition::from_mem0(&filter).unwrap();
        condition.admits(&Subject {
            metadata: Some(&metadata),
            created_at: at,
            updated_at: at,
        })
    }

    #[test]
    fn every_operator_holds_where_it_should_and_only_there() {
        let food = json!({"category": "food", "score": 7, "tags": ["Spicy", "veg"],
                          "note": "Loves Thai curry", "place": {"city": "Porto"}});
        let at = "2024-05-03T10:00:00Z";
        let cases = [
            (json!({"category": "food"}), true),
            (json!({"category": "travel"}), false),
            (json!({"category": {"eq": "food"}}), true),
            (json!({"category": {"ne": "food"}}), false),
            (json!({"missing": {"ne": "x"}}), true),
            (json!({"category": {"in": ["travel", "food"]}}), true),
            (json!({"category": {"nin": ["travel", "food"]}}), false),
            (json!({"score": {"gt": 6.5}}), true),
            (json!({"score": {"gte": 7, "lt": 7}}), false),
            (json!({"score": {"lte": 7.0}}), true),
            (json!({"score": {"gt": "6"}}), false),
            (json!({"note": {"contains": "Thai"}}), true),
            (json!({"note": {"contains": "thai"}}), false),
            (json!({"note": {"icontains": "THAI"}}), true),
            (json!({"tags": {"contains": "veg"}}), true),
            (json!({"tags": {"icontains": "spicy"}}), true),
            (json!({"category": "*"}), true),
            (json!({"missing": "*"}), false),
            (json!({"metadata": {"category": "food"}}), true),
            (json!({"place.city": "Porto"}), true),
            (json!({"place.city": {"in": ["Braga"]}}), false),
            (json!({"place.street.number": "*"}), false),
            (
                json!({"created_at": {"gte": "2024-05-01", "lt": "2024-06-01"}}),
                true,
            ),
            (json!({"created_at": {"gt": 1714730400}}), false),
            (
                json!({"updated_at": {"lt": "2024-05-03T12:00:00+01:00"}}),
                true,
            ),
            (
                json!({"OR": [{"category": "travel"}, {"score": {"gt": 5}}]}),
                true,
            ),
            (
                json!({"AND": [{"category": "food"}, {"score": {"gt": 9}}]}),
                false,
            ),
            (json!({"NOT": [{"category": "travel"}]}), true),
            (json!({"NOT": {"category": "food"}}), false),
        ];
        for (filter, expected) in cases {
            assert_eq!(
                admits(filter.clone(), food.clone(), at),
                expected,
                "{filter}"
            );
            // What a store narrows by never leaves out a memory the condition admits.
            let (metadata, at) = memory(food.clone(), at);
            let narrowing = Condition::from_mem0(&filter).unwrap().narrowing();
            assert!(
                !expected || narrowing.holds(at, Some(&metadata)),
                "{filter} narrows {narrowing:?} past what it admits"
            );
        }
    }

    #[test]
    fn unknown_operators_and_bad_operands_are_refused() {
        for (filter, said) in [
            (
                json!({"category": {"like": "f%"}}),
                "unknown filter operator \"like\"",
            ),
            (json!({"category": {"in": "food"}}), "takes a list"),
            (json!({"created_at": {"gte": "last week"}}), "bad time"),
            (json!({"created_at": {"contains": "2024"}}), "is a time"),
            (
                json!({"categories": {"contains": "x"}}),
                "cannot filter on \"categories\"",
            ),
            (json!({"AND": {"a": 1}}), "AND takes a list"),
            (json!({"user_id": {"ne": "sam"}}), "takes one string"),
        ] {
            let err = Condition::from_mem0(&filter).unwrap_err().0;
            assert!(err.contains(said), "{filter}: {err}");
        }
    }

    #[test]
    fn the_scope_is_lifted_from_the_top_conjunction_only() {
        let parsed = |f: Value| Condition::from_mem0(&f).unwrap().take_scope();
        let lifted = parsed(json!({"AND": [{"user_id": "sam"}, {"category": "food"}]})).unwrap();
        assert_eq!(lifted.user_id.as_deref(), Some("sam"));
        assert!(matches!(lifted.rest, Some(Condition::Test { .. })));
        let lifted = parsed(json!({"user_id": "sam", "run_id": "r1"})).unwrap();
        assert_eq!(
            (lifted.user_id.as_deref(), lifted.run_id.as_deref()),
            (Some("sam"), Some("r1"))
        );
        assert_eq!(lifted.rest, None);
        let err = parsed(json!({"OR": [{"user_id": "sam"}, {"user_id": "kim"}]})).unwrap_err();
        assert!(err.0.contains("top level"), "{err}");
        let err = parsed(json!({"AND": [{"user_id": "sam"}, {"user_id": "kim"}]})).unwrap_err();
        assert!(err.0.contains("twice"), "{err}");
    }
}
