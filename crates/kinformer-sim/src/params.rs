//! Query parameters of LIST and WATCH requests, validated like `ValidateListOptions`.

use crate::status::{ApiError, Cause, Details, Reason};

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    /// `NotOlderThan`.
    NotOlderThan,
    /// `Exact`.
    Exact,
}

/// Parsed LIST/WATCH query parameters.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    /// `watch=true`.
    pub watch: bool,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `shardSelector` (KEP-5866).
    pub shard_selector: Option<String>,
    /// `limit` (0 means none).
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion` as sent.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub rv_match: Option<RvMatch>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
}

fn parse_bool(name: &str, v: &str) -> Result<bool, ApiError> {
    match v {
        "true" | "True" | "TRUE" | "1" | "t" | "T" => Ok(true),
        "false" | "False" | "FALSE" | "0" | "f" | "F" | "" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "invalid value for {name}: \"{v}\""
        ))),
    }
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, ApiError> {
    let _ = name;
    // kube-apiserver passes the Go parser's error through.
    v.parse().map_err(|_| {
        ApiError::bad_request(format!("strconv.ParseInt: parsing \"{v}\": invalid syntax"))
    })
}

/// A 422 on `ListOptions`, as the apiserver reports validation failures of query parameters.
pub fn invalid_list_options(field: &str, message: &str) -> ApiError {
    invalid_list_options_all(&[(field, message)])
}

/// A 422 on `ListOptions` with every failed check, as the apiserver aggregates them.
pub fn invalid_list_options_all(errors: &[(&str, &str)]) -> ApiError {
    let parts: Vec<String> = errors.iter().map(|(f, m)| format!("{f}: {m}")).collect();
    let summary = match parts.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let causes = errors
        .iter()
        .map(|(field, message)| {
            let reason = if message.starts_with("Unsupported value") {
                "FieldValueNotSupported"
            } else if message.starts_with("Required value") {
                "FieldValueRequired"
            } else if message.starts_with("Invalid value") {
                "FieldValueInvalid"
            } else {
                "FieldValueForbidden"
            };
            Cause {
                reason: Some(reason.into()),
                message: message.to_string(),
                field: Some(field.to_string()),
            }
        })
        .collect();
    ApiError::new(
        Reason::Invalid,
        format!("ListOptions.meta.k8s.io \"\" is invalid: {summary}"),
    )
    .with_details(Details {
        group: Some("meta.k8s.io".into()),
        kind: Some("ListOptions".into()),
        causes,
        ..Details::default()
    })
}

/// Parse a resourceVersion: `Ok(None)` for "" (most recent), `Ok(Some(0))` for "0" (any).
pub fn parse_rv(s: Option<&str>) -> Result<Option<u64>, ApiError> {
    match s {
        None | Some("") => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "invalid resource version: resourceVersion: Invalid value: \"{v}\": strconv.ParseUint: parsing \"{v}\": invalid syntax"
            ))
        }),
    }
}

impl ListParams {
    /// Parse and validate from a query string.
    pub fn from_query(query: Option<&str>) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = match query {
            Some(q) => serde_urlencoded_pairs(q)?,
            None => Vec::new(),
        };
        let mut p = ListParams::default();
        for (k, v) in pairs {
            match k.as_str() {
                "watch" => p.watch = parse_bool(&k, &v)?,
                "labelSelector" => p.label_selector = Some(v),
                "fieldSelector" => p.field_selector = Some(v),
                "shardSelector" => p.shard_selector = Some(v),
                "limit" => {
                    p.limit = Some(parse_num::<i64>(&k, &v)?.max(0) as usize).filter(|l| *l > 0)
                }
                "continue" => p.continue_token = Some(v).filter(|c| !c.is_empty()),
                "resourceVersion" => p.resource_version = Some(v),
                "resourceVersionMatch" => {
                    p.rv_match = match v.as_str() {
                        "" => None,
                        "NotOlderThan" => Some(RvMatch::NotOlderThan),
                        "Exact" => Some(RvMatch::Exact),
                        other => {
                            return Err(invalid_list_options(
                                "resourceVersionMatch",
                                &format!(
                                    "Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
                                ),
                            ));
                        }
                    }
                }
                "timeoutSeconds" => p.timeout_seconds = Some(parse_num(&k, &v)?),
                "allowWatchBookmarks" => p.allow_bookmarks = parse_bool(&k, &v)?,
                "sendInitialEvents" => p.send_initial_events = Some(parse_bool(&k, &v)?),
                _ => {}
            }
        }
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<(), ApiError> {
        parse_rv(self.resource_version.as_deref())?;
        let rv = self.resource_version.as_deref().unwrap_or("");
        if let Some(m) = self.rv_match {
            if self.watch && self.send_initial_events.is_none() {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if rv.is_empty() && !self.watch {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if m == RvMatch::Exact && rv == "0" {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
            if self.continue_token.is_some() {
                return Err(invalid_list_options(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        if self.send_initial_events.is_some() {
            if !self.watch {
                return Err(invalid_list_options(
                    "sendInitialEvents",
                    "Forbidden: sendInitialEvents is forbidden for list",
                ));
            }
            if self.rv_match != Some(RvMatch::NotOlderThan) {
                const FORBIDDEN: &str = "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan";
                return Err(match self.rv_match {
                    Some(RvMatch::Exact) => invalid_list_options_all(&[
                        ("resourceVersionMatch", FORBIDDEN),
                        (
                            "resourceVersionMatch",
                            "Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
                        ),
                    ]),
                    _ => invalid_list_options("resourceVersionMatch", FORBIDDEN),
                });
            }
            // Without allowWatchBookmarks kube-apiserver streams the initial events and just
            // leaves out the initial-events-end bookmark.
        }
        if self.continue_token.is_some() && !rv.is_empty() && rv != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(())
    }
}

fn serde_urlencoded_pairs(q: &str) -> Result<Vec<(String, String)>, ApiError> {
    let uri: http::Uri = format!("/?{q}")
        .parse()
        .map_err(|_| ApiError::bad_request("malformed query string"))?;
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("malformed query string: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_watch() {
        let p = ListParams::from_query(Some(
            "watch=true&timeoutSeconds=5&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&labelSelector=a%3Db",
        ))
        .unwrap();
        assert!(p.watch && p.allow_bookmarks);
        assert_eq!(p.label_selector.as_deref(), Some("a=b"));
        assert_eq!(p.timeout_seconds, Some(5));
    }

    #[test]
    fn rejects() {
        assert_eq!(
            ListParams::from_query(Some("resourceVersion=abc"))
                .unwrap_err()
                .code(),
            400
        );
        assert_eq!(
            ListParams::from_query(Some("limit=x")).unwrap_err().code(),
            400
        );
        assert_eq!(
            ListParams::from_query(Some("resourceVersionMatch=Exact"))
                .unwrap_err()
                .code(),
            422
        );
        assert_eq!(
            ListParams::from_query(Some("sendInitialEvents=true"))
                .unwrap_err()
                .code(),
            422
        );
    }
}
