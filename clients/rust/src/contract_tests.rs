//! Round-trips every example of the contract (`openapi.yaml`, and the JSON
//! and event-stream examples of `docs/client-operations.md`) through the
//! wire types: decode, encode, and compare with the example (absent and null
//! members are the same to the contract). A unit test: the wire types are
//! the crate's own, not public API.

use crate::sse::Parser;
use crate::wire::*;
use serde_json::Value;
use std::collections::VecDeque;

fn repo_file(rel: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_nulls).collect()),
        v => v,
    }
}

/// The body of `movePlacement` (an operator's request: the SDK does not
/// send it, so it has no wire type of the crate's).
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct MoveRequest {
    to: String,
}

fn rt<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> Value {
    let t: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("decoding {v}: {e}"));
    serde_json::to_value(&t).unwrap()
}

/// Round-trips v as the schema named; panics for a schema without a type.
fn round_trip(schema: &str, v: &Value) {
    let got = match schema {
        "CreateSessionRequest" => rt::<CreateSessionRequest>(v),
        "Session" => rt::<SessionInfo>(v),
        "Keepalive" => rt::<Keepalive>(v),
        "AcquireRequest" => rt::<AcquireRequest>(v),
        "ExtendRequest" => rt::<ExtendRequest>(v),
        "ReleaseRequest" => rt::<ReleaseRequest>(v),
        "Lease" => rt::<LeaseGrant>(v),
        "LeaseStatus" => rt::<LeaseStatus>(v),
        "BatchRequest" => rt::<BatchRequest>(v),
        "BatchOp" => rt::<BatchOp>(v),
        "BatchResponse" => rt::<BatchResponse>(v),
        "BatchResult" => rt::<BatchOpResult>(v),
        "LeaseItem" => rt::<Item>(v),
        "LeasePage" => rt::<LeasePage>(v),
        "SnapshotEvent" => rt::<SnapshotEvent>(v),
        "ChangeEvent" => rt::<ChangeEvent>(v),
        "StreamEndEvent" => rt::<StreamEndEvent>(v),
        "RegisterRequest" => rt::<RegisterRequest>(v),
        "SpecRow" => rt::<Spec>(v),
        "SpecPage" => rt::<SpecPage>(v),
        "SweepRequest" => rt::<SweepRequest>(v),
        "SweepResult" => rt::<SweepAnswer>(v),
        "PlanRequest" => rt::<PlanRequest>(v),
        "Plan" => rt::<PlanAnswer>(v),
        "Gap" => rt::<GapAnswer>(v),
        "Health" => rt::<Health>(v),
        "Problem" => rt::<ProblemBody>(v),
        "MoveRequest" => rt::<MoveRequest>(v),
        other => panic!("no wire type for schema {other}"),
    };
    assert_eq!(strip_nulls(got), strip_nulls(v.clone()), "schema {schema}");
}

/// Round-trips the events of an event-stream example; returns how many.
fn event_stream(text: &str) -> usize {
    let mut p = Parser::new(1 << 20);
    let mut out = VecDeque::new();
    p.push(text.as_bytes(), &mut out).unwrap();
    let n = out.len();
    for ev in out {
        let v: Value =
            serde_json::from_str(&ev.data).unwrap_or_else(|e| panic!("{}: {e}", ev.data));
        let schema = match ev.name.as_str() {
            "snapshot" => "SnapshotEvent",
            "change" => "ChangeEvent",
            _ => "StreamEndEvent",
        };
        round_trip(schema, &v);
    }
    n
}

fn schema_name(media: &Value) -> Option<String> {
    media["schema"]["$ref"]
        .as_str()
        .map(|r| r.rsplit('/').next().unwrap().to_string())
}

#[test]
fn every_openapi_example_round_trips() {
    let doc: Value = serde_yaml::from_str(&repo_file("openapi.yaml")).unwrap();
    let mut bodies = Vec::new(); // (where, media object)
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            if let Some(c) = op["requestBody"]["content"].as_object() {
                bodies.extend(
                    c.values()
                        .map(|m| (format!("{method} {path} request"), m.clone())),
                );
            }
            for (status, resp) in op["responses"].as_object().into_iter().flatten() {
                if let Some(c) = resp["content"].as_object() {
                    bodies.extend(
                        c.iter()
                            .map(|(mt, m)| (format!("{method} {path} {status} {mt}"), m.clone())),
                    );
                }
            }
        }
    }
    for (name, resp) in doc["components"]["responses"].as_object().unwrap() {
        if let Some(c) = resp["content"].as_object() {
            bodies.extend(c.values().map(|m| (format!("response {name}"), m.clone())));
        }
    }
    let (mut json, mut events) = (0, 0);
    for (at, media) in bodies {
        let Some(example) = media.get("example") else {
            continue;
        };
        if let Some(text) = example.as_str() {
            // YAML keeps one final newline: the last blank line is implied.
            let n = event_stream(&format!("{text}\n"));
            assert!(n > 0, "{at}: no event in the stream example");
            events += n;
        } else {
            let schema =
                schema_name(&media).unwrap_or_else(|| panic!("{at}: an example without a schema"));
            round_trip(&schema, example);
            json += 1;
        }
    }
    // 7 request bodies and 8 problem responses, and the watch stream's
    // snapshot and change: a contract that loses examples fails here.
    assert!(json >= 15, "only {json} JSON examples found");
    assert_eq!(events, 2, "the watch example's events");
}

#[test]
fn client_operations_examples_round_trip() {
    let doc = repo_file("docs/client-operations.md");
    let mut n = 0;
    for block in doc.split("```").skip(1).step_by(2) {
        if let Some(body) = block.strip_prefix("json\n") {
            let v: Value = serde_json::from_str(body).unwrap();
            let schema = if v.get("ops").is_some() {
                "BatchRequest"
            } else if v.get("results").is_some() {
                "BatchResponse"
            } else if v.get("code").is_some() {
                "Problem"
            } else if v.get("session_id").is_some() {
                "Session"
            } else if v.get("fencing_token").is_some() {
                "Lease"
            } else if v.get("snapshot").is_some() {
                "LeasePage"
            } else {
                panic!("unclassified example {v}")
            };
            round_trip(schema, &v);
            n += 1;
        } else if block.starts_with('\n') && block.contains("data: ") {
            n += event_stream(block);
        }
    }
    assert!(n >= 8, "only {n} examples found");
}

#[test]
fn the_sdk_knows_every_contract_code_in_order() {
    // The code set is open: the known codes are listed under
    // `x-extensible-enum`, deliberately not a closed `enum`.
    let doc: Value = serde_yaml::from_str(&repo_file("openapi.yaml")).unwrap();
    let code = &doc["components"]["schemas"]["ErrorCode"];
    assert!(
        code.get("enum").is_none(),
        "ErrorCode is a closed enum again"
    );
    let codes: Vec<&str> = code["x-extensible-enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(codes, crate::CODES);
}
