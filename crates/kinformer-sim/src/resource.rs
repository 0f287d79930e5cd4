//! The resources the sim serves: built-in core/v1 kinds plus schemaless ones registered at start.

use serde::{Deserialize, Serialize};

/// One served group/version/resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceDef {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural resource name used in URLs, e.g. `pods`.
    pub plural: String,
    /// Singular name, e.g. `pod`.
    pub singular: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl ResourceDef {
    /// A resource definition.
    pub fn new(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.into(),
            namespaced,
        }
    }

    /// `v1` or `group/version`, as written in `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether objects carry `metadata.generation`, as kube-apiserver's strategies set it: pods
    /// and custom resources do; configmaps, namespaces, nodes and leases do not.
    pub fn tracks_generation(&self) -> bool {
        (!self.group.is_empty() && self.group != "coordination.k8s.io") || self.plural == "pods"
    }

    /// Whether DELETE answers with the deleted object (pods, namespaces: the registry's
    /// `ReturnDeletedObject`) rather than a `Status` of success (everything else).
    pub fn returns_deleted_object(&self) -> bool {
        self.group.is_empty() && matches!(self.plural.as_str(), "pods" | "namespaces")
    }

    /// Whether the `spec.nodeName` field selector is supported (pods only).
    pub fn supports_node_name(&self) -> bool {
        self.group.is_empty() && self.plural == "pods"
    }

    /// The built-in resources: core/v1 pods, configmaps, namespaces, nodes,
    /// and coordination.k8s.io/v1 leases (for leader election).
    pub fn builtins() -> Vec<ResourceDef> {
        vec![
            ResourceDef::new("", "v1", "pods", "Pod", true),
            ResourceDef::new("", "v1", "configmaps", "ConfigMap", true),
            ResourceDef::new("", "v1", "namespaces", "Namespace", false),
            ResourceDef::new("", "v1", "nodes", "Node", false),
            ResourceDef::new("coordination.k8s.io", "v1", "leases", "Lease", true),
        ]
    }
}

/// Index of a resource inside the sim (position in the registry).
pub type ResourceId = usize;

/// All served resources.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    defs: Vec<ResourceDef>,
}

impl Registry {
    /// A registry of the given definitions, duplicates (same group/version/plural) dropped.
    pub fn new(defs: Vec<ResourceDef>) -> Self {
        let mut out: Vec<ResourceDef> = Vec::new();
        for d in defs {
            if !out
                .iter()
                .any(|o| o.group == d.group && o.version == d.version && o.plural == d.plural)
            {
                out.push(d);
            }
        }
        Self { defs: out }
    }

    /// All definitions, indexed by [`ResourceId`].
    pub fn defs(&self) -> &[ResourceDef] {
        &self.defs
    }

    /// Definition by id.
    pub fn get(&self, id: ResourceId) -> Option<&ResourceDef> {
        self.defs.get(id)
    }

    /// Look up by group, version and plural.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<ResourceId> {
        self.defs
            .iter()
            .position(|d| d.group == group && d.version == version && d.plural == plural)
    }

    /// Look up by plural name or kind (case-insensitive), first match in any group.
    pub fn find_by_name(&self, name: &str) -> Option<ResourceId> {
        self.defs.iter().position(|d| {
            d.plural.eq_ignore_ascii_case(name)
                || d.kind.eq_ignore_ascii_case(name)
                || d.singular == name
        })
    }

    /// Distinct groups (non-core) with their versions, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.defs.iter().filter(|d| !d.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, versions)) => {
                    if !versions.contains(&d.version) {
                        versions.push(d.version.clone());
                    }
                }
                None => out.push((d.group.clone(), vec![d.version.clone()])),
            }
        }
        out
    }
}
