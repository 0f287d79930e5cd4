//! Label and field selectors, parsed like k8s.io/apimachinery `labels.Parse` and `fields.ParseSelector`.

use crate::object::ObjMeta;
use crate::status::ApiError;
use kinformer_wire::WireError;
use kinformer_wire::shard::{ShardField, ShardSelector};

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelReq {
    /// `key` — the label exists.
    Exists(String),
    /// `!key` — the label does not exist.
    NotExists(String),
    /// `key in (a,b)`; `key=a` and `key==a` are `In` with one value.
    In(String, Vec<String>),
    /// `key notin (a,b)`; `key!=a` is `NotIn` with one value. Matches when the label is absent.
    NotIn(String, Vec<String>),
    /// `key > n`.
    Gt(String, i64),
    /// `key < n`.
    Lt(String, i64),
}

impl LabelReq {
    fn matches(&self, meta: &ObjMeta) -> bool {
        let get = |k: &String| meta.labels.get(k);
        match self {
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// A field requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldReq {
    /// The field.
    pub field: Field,
    /// The value compared.
    pub value: String,
    /// `true` for `!=`.
    pub negate: bool,
}

/// Fields the sim can select on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `metadata.name`.
    Name,
    /// `metadata.namespace`.
    Namespace,
    /// `spec.nodeName` (pods only).
    NodeName,
}

/// A parsed label selector plus field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// Label requirements, all must hold.
    pub labels: Vec<LabelReq>,
    /// Field requirements, all must hold.
    pub fields: Vec<FieldReq>,
    /// The shard (KEP-5866's `shardSelector`), if one was asked for.
    pub shard: Option<ShardSelector>,
}

impl Selector {
    /// Parse `labelSelector` and `fieldSelector`; `node_name` says whether `spec.nodeName` is supported.
    pub fn parse(
        label: Option<&str>,
        field: Option<&str>,
        node_name: bool,
    ) -> Result<Self, ApiError> {
        Ok(Selector {
            labels: label.map(parse_labels).transpose()?.unwrap_or_default(),
            fields: field
                .map(|f| parse_fields(f, node_name))
                .transpose()?
                .unwrap_or_default(),
            shard: None,
        })
    }

    /// Adds a `shardSelector`; a malformed one is answered as kube-apiserver
    /// v1.37 answers it: a 500 without a reason, `invalid shard selector: …`.
    pub fn with_shard(mut self, shard: Option<&str>) -> Result<Self, ApiError> {
        self.shard = shard
            .map(|s| {
                s.parse::<ShardSelector>().map_err(|e| {
                    let reason = match e {
                        WireError::ShardSelector(m) => m,
                        other => other.to_string(),
                    };
                    ApiError::unclassified(format!("invalid shard selector: {reason}"))
                })
            })
            .transpose()?;
        Ok(self)
    }

    /// Whether nothing is selected on (everything matches).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.shard.is_none()
    }

    /// Whether an object matches.
    pub fn matches(&self, meta: &ObjMeta) -> bool {
        self.shard.as_ref().is_none_or(|s| match s.field() {
            ShardField::Uid => s.matches(&meta.uid),
            ShardField::Namespace => s.matches(&meta.namespace),
        }) && self.labels.iter().all(|r| r.matches(meta))
            && self.fields.iter().all(|f| {
                let actual = match f.field {
                    Field::Name => meta.name.as_str(),
                    Field::Namespace => meta.namespace.as_str(),
                    Field::NodeName => meta.node_name.as_deref().unwrap_or(""),
                };
                (actual == f.value) != f.negate
            })
    }
}

/// Parse a field selector (`a=b`, `a==b`, `a!=b`, comma separated).
pub fn parse_fields(s: &str, node_name: bool) -> Result<Vec<FieldReq>, ApiError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value, negate) = if let Some((k, v)) = part.split_once("!=") {
            (k, v, true)
        } else if let Some((k, v)) = part.split_once("==") {
            (k, v, false)
        } else if let Some((k, v)) = part.split_once('=') {
            (k, v, false)
        } else {
            return Err(ApiError::bad_request(format!(
                "invalid selector: '{s}'; can't understand '{part}'"
            )));
        };
        let field = match key.trim() {
            "metadata.name" => Field::Name,
            "metadata.namespace" => Field::Namespace,
            "spec.nodeName" if node_name => Field::NodeName,
            other => {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {other}"
                )));
            }
        };
        out.push(FieldReq {
            field,
            value: value.trim().to_string(),
            negate,
        });
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
}

fn tokenize(s: &str) -> Result<Vec<Tok>, ApiError> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '!' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    out.push(Tok::NotEq);
                } else {
                    out.push(Tok::Not);
                }
            }
            '=' => {
                chars.next();
                if chars.peek() == Some(&'=') {
                    chars.next();
                    out.push(Tok::DoubleEq);
                } else {
                    out.push(Tok::Eq);
                }
            }
            '>' | '<' | '(' | ')' | ',' => {
                chars.next();
                out.push(match c {
                    '>' => Tok::Gt,
                    '<' => Tok::Lt,
                    '(' => Tok::Open,
                    ')' => Tok::Close,
                    _ => Tok::Comma,
                });
            }
            _ => {
                let mut id = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || "!=<>(),".contains(c) {
                        break;
                    }
                    id.push(c);
                    chars.next();
                }
                out.push(Tok::Ident(id));
            }
        }
    }
    Ok(out)
}

fn valid_value(v: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    v.is_empty()
        || (v.len() <= 63
            && v.chars().all(|c| alnum(c) || "-_.".contains(c))
            && v.chars().next().is_some_and(alnum)
            && v.chars().last().is_some_and(alnum))
}

fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    });
    prefix_ok && !name.is_empty() && valid_value(name)
}

/// Parse a label selector.
pub fn parse_labels(s: &str) -> Result<Vec<LabelReq>, ApiError> {
    let toks = tokenize(s)?;
    let err = |m: &str| ApiError::bad_request(format!("unable to parse requirement: {m}"));
    let mut out = Vec::new();
    let mut i = 0;
    let key_at = |i: usize| -> Result<String, ApiError> {
        match toks.get(i) {
            Some(Tok::Ident(k)) if valid_key(k) => Ok(k.clone()),
            Some(Tok::Ident(k)) => Err(err(&format!("invalid label key \"{k}\""))),
            _ => Err(err("found unexpected token, expected: identifier")),
        }
    };
    let value_ok = |v: &str| -> Result<String, ApiError> {
        if valid_value(v) {
            Ok(v.to_string())
        } else {
            Err(err(&format!("invalid label value: \"{v}\"")))
        }
    };
    while i < toks.len() {
        let req = if toks[i] == Tok::Not {
            let k = key_at(i + 1)?;
            i += 2;
            LabelReq::NotExists(k)
        } else {
            let k = key_at(i)?;
            i += 1;
            match toks.get(i) {
                None | Some(Tok::Comma) => LabelReq::Exists(k),
                Some(op @ (Tok::Eq | Tok::DoubleEq | Tok::NotEq)) => {
                    let neg = *op == Tok::NotEq;
                    i += 1;
                    let v = match toks.get(i) {
                        Some(Tok::Ident(v)) => {
                            i += 1;
                            value_ok(v)?
                        }
                        None | Some(Tok::Comma) => String::new(),
                        _ => return Err(err("found unexpected token, expected: identifier")),
                    };
                    if neg {
                        LabelReq::NotIn(k, vec![v])
                    } else {
                        LabelReq::In(k, vec![v])
                    }
                }
                Some(op @ (Tok::Gt | Tok::Lt)) => {
                    let gt = *op == Tok::Gt;
                    i += 1;
                    let n = match toks.get(i) {
                        Some(Tok::Ident(v)) => v
                            .parse::<i64>()
                            .map_err(|_| err(&format!("invalid integer value \"{v}\"")))?,
                        _ => return Err(err("expected an integer")),
                    };
                    i += 1;
                    if gt {
                        LabelReq::Gt(k, n)
                    } else {
                        LabelReq::Lt(k, n)
                    }
                }
                Some(Tok::Ident(op)) if op == "in" || op == "notin" => {
                    let notin = op == "notin";
                    i += 1;
                    if toks.get(i) != Some(&Tok::Open) {
                        return Err(err("found unexpected token, expected: '('"));
                    }
                    i += 1;
                    let mut values = Vec::new();
                    loop {
                        match toks.get(i) {
                            Some(Tok::Ident(v)) => {
                                values.push(value_ok(v)?);
                                i += 1;
                            }
                            Some(Tok::Comma) | Some(Tok::Close) => values.push(String::new()),
                            _ => return Err(err("found unexpected token in values list")),
                        }
                        match toks.get(i) {
                            Some(Tok::Comma) => i += 1,
                            Some(Tok::Close) => {
                                i += 1;
                                break;
                            }
                            _ => return Err(err("found unexpected token, expected: ',' or ')'")),
                        }
                    }
                    if notin {
                        LabelReq::NotIn(k, values)
                    } else {
                        LabelReq::In(k, values)
                    }
                }
                Some(_) => return Err(err("found unexpected token, expected: operator")),
            }
        };
        out.push(req);
        match toks.get(i) {
            None => break,
            Some(Tok::Comma) => {
                i += 1;
                if i == toks.len() {
                    return Err(err("found end of string, expected: identifier"));
                }
            }
            Some(_) => {
                return Err(err(
                    "found unexpected token, expected: ',' or 'end of string'",
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(labels: &[(&str, &str)]) -> ObjMeta {
        ObjMeta {
            name: "n".into(),
            namespace: "ns".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ObjMeta::default()
        }
    }

    fn sel(s: &str) -> Selector {
        Selector::parse(Some(s), None, true).unwrap()
    }

    #[test]
    fn operators() {
        let m = meta(&[("app", "web"), ("tier", "fe"), ("n", "5")]);
        assert!(sel("app=web").matches(&m));
        assert!(sel("app==web,tier").matches(&m));
        assert!(!sel("app!=web").matches(&m));
        assert!(sel("app in (web, db)").matches(&m));
        assert!(!sel("app notin (web,db)").matches(&m));
        assert!(sel("missing notin (x)").matches(&m));
        assert!(sel("!missing").matches(&m));
        assert!(!sel("!app").matches(&m));
        assert!(sel("n>4,n<6").matches(&m));
        assert!(sel("example.com/key!=x").matches(&m));
        assert!(sel("").matches(&m));
    }

    #[test]
    fn errors() {
        for bad in [
            "app=",
            "=x",
            "app in web",
            "app in (web",
            "a b",
            "app=web,",
            "app==!",
            "Bad Key=1",
            "a=b=c",
        ] {
            if bad == "app=" {
                continue; // empty value is legal
            }
            assert!(parse_labels(bad).is_err(), "{bad} should fail");
        }
        assert_eq!(
            parse_labels("app=").unwrap(),
            vec![LabelReq::In("app".into(), vec![String::new()])]
        );
    }

    #[test]
    fn fields() {
        let mut m = meta(&[]);
        m.node_name = Some("node-1".into());
        let s = Selector::parse(None, Some("metadata.name=n,spec.nodeName=node-1"), true).unwrap();
        assert!(s.matches(&m));
        let s = Selector::parse(None, Some("metadata.namespace!=ns"), true).unwrap();
        assert!(!s.matches(&m));
        assert!(Selector::parse(None, Some("spec.nodeName=x"), false).is_err());
        assert!(Selector::parse(None, Some("status.phase=Running"), true).is_err());
        assert!(Selector::parse(None, Some("garbage"), true).is_err());
    }
}
