//! [`Route`]: an exact route, parsed far enough to build its lease's URL.

use super::{Client, Url};
use crate::error::{Error, Problem, Result};

/// A parsed exact route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub realm: String,
    pub area: String,
    pub resource: String,
}

impl Route {
    /// Splits `lease://realm/area/resource`. Only the shape needed to build a
    /// path is checked; the broker checks the rest (a wildcard segment is its
    /// `invalid_route`).
    pub fn parse(s: &str) -> Result<Route> {
        let bad = || {
            Error::InvalidRoute(Problem::local(
                "a route is lease://{realm}/{area}/{resource}",
            ))
        };
        let rest = s.strip_prefix("lease://").ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split('/').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
            return Err(bad());
        }
        Ok(Route {
            realm: parts[0].into(),
            area: parts[1].into(),
            resource: parts[2].into(),
        })
    }

    /// The URL of this route's lease, with an optional final segment.
    pub fn url(&self, c: &Client, verb: Option<&str>) -> Url {
        let mut segs = vec!["v1", "leases", &self.realm, &self.area, &self.resource];
        if let Some(v) = verb {
            segs.push(v);
        }
        c.url(&segs)
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "lease://{}/{}/{}", self.realm, self.area, self.resource)
    }
}
