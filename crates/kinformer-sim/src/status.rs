//! Kubernetes `Status` error bodies, shaped exactly like kube-apiserver's.

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

/// The `reason` of a failed `Status`, as in k8s.io/apimachinery `StatusReason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Reason {
    /// 404: the resource or object does not exist.
    NotFound,
    /// 409: the object already exists.
    AlreadyExists,
    /// 409: a precondition (resourceVersion) failed.
    Conflict,
    /// 410: the requested resourceVersion or continue token is too old.
    Expired,
    /// 410: the resource is gone.
    Gone,
    /// 400: the request is malformed.
    BadRequest,
    /// 405: the method is not allowed on this resource.
    MethodNotAllowed,
    /// 406: the requested representation is not available.
    NotAcceptable,
    /// 415: the request body's content type is not supported.
    UnsupportedMediaType,
    /// 422: the object or a parameter is invalid.
    Invalid,
    /// 429: the client should retry later.
    TooManyRequests,
    /// 500: a server error.
    InternalError,
    /// 504: the server timed out, e.g. waiting for a future resourceVersion.
    Timeout,
    /// 500 with no `reason` (`StatusReasonUnknown`): what kube-apiserver
    /// answers for an error it did not classify, e.g. a malformed
    /// `shardSelector`.
    Unknown,
}

impl Reason {
    /// The HTTP status code kube-apiserver uses with this reason.
    pub fn code(self) -> u16 {
        match self {
            Reason::NotFound => 404,
            Reason::AlreadyExists | Reason::Conflict => 409,
            Reason::Expired | Reason::Gone => 410,
            Reason::BadRequest => 400,
            Reason::MethodNotAllowed => 405,
            Reason::NotAcceptable => 406,
            Reason::UnsupportedMediaType => 415,
            Reason::Invalid => 422,
            Reason::TooManyRequests => 429,
            Reason::InternalError | Reason::Unknown => 500,
            Reason::Timeout => 504,
        }
    }

    fn is_unknown(&self) -> bool {
        *self == Reason::Unknown
    }
}

/// One cause in `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// Machine-readable cause, e.g. `FieldValueInvalid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable description.
    pub message: String,
    /// The field concerned, e.g. `metadata.name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// `details` of a `Status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Details {
    /// Name of the object concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// API group of the resource concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Resource (plural) concerned, as the apiserver writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Causes, for `Invalid` and `InternalError`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// Seconds to wait before retrying (429).
    #[serde(rename = "retryAfterSeconds", skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

/// An API error, rendered as a Kubernetes `Status` body: the simulator's one
/// error type (a bad selector is a 400 `BadRequest`, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
#[error("{reason:?} ({code}): {message}", code = reason.code())]
pub struct ApiError {
    /// The status reason.
    pub reason: Reason,
    /// Human-readable message.
    pub message: String,
    /// Details, boxed to keep the error small; `None` omits the field.
    pub details: Option<Box<Details>>,
    /// `metadata.continue` of the `Status`: the token of an expired continue's inconsistent
    /// continuation.
    pub list_continue: Option<String>,
}

#[derive(Serialize)]
struct StatusBody<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: serde_json::Map<String, serde_json::Value>,
    status: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "Reason::is_unknown")]
    reason: Reason,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Details>,
    code: u16,
}

impl ApiError {
    /// A new error with the given reason and message and no details.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            details: None,
            list_continue: None,
        }
    }

    /// Attach a `metadata.continue` token.
    pub fn with_continue(mut self, token: String) -> Self {
        self.list_continue = Some(token);
        self
    }

    /// Attach details.
    pub fn with_details(mut self, details: Details) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        self.reason.code()
    }

    /// A 500 with no reason, as kube-apiserver answers errors it does not
    /// classify.
    pub fn unclassified(message: impl Into<String>) -> Self {
        Self::new(Reason::Unknown, message)
    }

    /// `pods "x" not found`.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        Self::new(
            Reason::NotFound,
            format!("{} \"{name}\" not found", qualified(resource, group)),
        )
        .with_details(obj_details(resource, group, name))
    }

    /// `pods "x" already exists`.
    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        Self::new(
            Reason::AlreadyExists,
            format!("{} \"{name}\" already exists", qualified(resource, group)),
        )
        .with_details(obj_details(resource, group, name))
    }

    /// The optimistic-concurrency conflict of a stale update.
    pub fn conflict(resource: &str, group: &str, name: &str) -> Self {
        Self::new(
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(resource, group)
            ),
        )
        .with_details(obj_details(resource, group, name))
    }

    /// 410 Expired, e.g. `too old resource version: 5 (100)`.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(Reason::Expired, message)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(Reason::BadRequest, message)
    }

    /// 422 Invalid for one field of an object; `kind` is the object's Kind (e.g. `Pod`).
    pub fn invalid(
        kind: &str,
        group: &str,
        name: &str,
        field: &str,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        let cause = if message.starts_with("Required value") {
            "FieldValueRequired"
        } else {
            "FieldValueInvalid"
        };
        Self::new(
            Reason::Invalid,
            format!("{kind} \"{name}\" is invalid: {field}: {message}"),
        )
        .with_details(Details {
            causes: vec![Cause {
                reason: Some(cause.into()),
                message,
                field: Some(field.into()),
            }],
            ..obj_details(kind, group, name)
        })
    }

    /// 409 for a delete whose `preconditions.resourceVersion` is stale; `kind` is the Kind.
    pub fn precondition_failed(
        kind: &str,
        group: &str,
        name: &str,
        wanted: u64,
        actual: u64,
    ) -> Self {
        Self::new(
            Reason::Conflict,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the ResourceVersion in the \
                 precondition ({wanted}) does not match the ResourceVersion in record ({actual}). \
                 The object might have been modified",
                qualified(kind, group)
            ),
        )
        .with_details(obj_details(kind, group, name))
    }

    /// 406 for a metadata-only `Accept` of the wrong shape (`PartialObjectMetadata` for a list or
    /// `PartialObjectMetadataList` for one object).
    pub fn not_acceptable(wanted: &str, got_list: bool, go_type: &str) -> Self {
        let what = if got_list {
            "the requested object is a list"
        } else {
            "the requested object is not a list"
        };
        Self::new(
            Reason::NotAcceptable,
            format!("you requested {wanted}, but {what} ({go_type})"),
        )
    }

    /// 404 for a path no resource serves.
    pub fn unknown_resource() -> Self {
        Self::new(
            Reason::NotFound,
            "the server could not find the requested resource",
        )
        .with_details(Details::default())
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed() -> Self {
        Self::new(
            Reason::MethodNotAllowed,
            "the server does not allow this method on the requested resource",
        )
        .with_details(Details::default())
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            Reason::InternalError,
            format!("Internal error occurred: {message}"),
        )
        .with_details(Details {
            causes: vec![Cause {
                reason: None,
                message,
                field: None,
            }],
            ..Details::default()
        })
    }

    /// 429 TooManyRequests with a retry hint.
    pub fn too_many_requests(retry_after_seconds: u64) -> Self {
        Self::new(
            Reason::TooManyRequests,
            "Too many requests, please try again later.",
        )
        .with_details(Details {
            retry_after_seconds: Some(retry_after_seconds),
            ..Details::default()
        })
    }

    /// The `Status` object as JSON bytes (no trailing newline).
    pub fn to_json(&self) -> Bytes {
        let body = StatusBody {
            kind: "Status",
            api_version: "v1",
            metadata: self
                .list_continue
                .iter()
                .map(|c| ("continue".to_string(), serde_json::Value::from(c.as_str())))
                .collect(),
            status: "Failure",
            message: &self.message,
            reason: self.reason,
            details: self.details.as_deref(),
            code: self.code(),
        };
        // Serializing plain strings and maps cannot fail; fall back to a fixed body anyway.
        serde_json::to_vec(&body).map(Bytes::from).unwrap_or_else(|_| {
            Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":500}"#)
        })
    }

    /// A watch `ERROR` event line carrying this `Status`.
    pub fn to_watch_line(&self) -> Bytes {
        let status = self.to_json();
        let mut line = Vec::with_capacity(status.len() + 32);
        line.extend_from_slice(br#"{"type":"ERROR","object":"#);
        line.extend_from_slice(&status);
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }
}

/// The `Status` of success a DELETE answers with for resources that do not return the deleted
/// object (`details.kind` is the resource, as kube-apiserver writes it).
pub fn delete_success(resource: &str, group: &str, name: &str, uid: &str) -> Bytes {
    let mut details = serde_json::json!({"name": name, "kind": resource, "uid": uid});
    if !group.is_empty() {
        details["group"] = group.into();
    }
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "details": details});
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (code, self.to_json()).into_response();
        let headers = resp.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(secs) = self.details.as_ref().and_then(|d| d.retry_after_seconds) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn obj_details(resource: &str, group: &str, name: &str) -> Details {
    Details {
        name: (!name.is_empty()).then(|| name.to_string()),
        group: (!group.is_empty()).then(|| group.to_string()),
        kind: Some(resource.to_string()),
        ..Details::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_shape() {
        let v: serde_json::Value =
            serde_json::from_slice(&ApiError::not_found("pods", "", "x").to_json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message":"pods \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404})
        );
    }
}
