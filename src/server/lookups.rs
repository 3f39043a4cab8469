//! Where a webhook's `queries` are answered: from the cluster snapshot (folder mode) or by the API
//! server (live mode). One type, so the request path is the same in both modes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::status_writes::StatusWrites;

use crate::cluster::live::LiveLookups;
use crate::cluster::query::{Target, WriteFailure};
use crate::cluster::{Answers, Query, Snapshot};

pub enum Lookups {
    /// Folder mode: the folder is the whole cluster, so lookups read the snapshot.
    Snapshot,
    /// Live mode: pods, PVCs and custom resources are asked of the API server, never cached.
    Live(LiveLookups),
}

impl Lookups {
    /// Write `object`'s status to `target`: to the API server in live mode, to `writes`' memory in
    /// folder mode (the folder is never written).
    pub async fn update_status(
        &self,
        writes: &StatusWrites,
        snapshot: &Snapshot,
        target: &Target,
        object: &Value,
    ) -> Result<Arc<Value>, WriteFailure> {
        match self {
            Lookups::Snapshot => writes.write_in_memory(target, object, snapshot),
            Lookups::Live(live) => live.update_status(target, object).await,
        }
    }

    /// Answer `queries`, within `budget` (what is left of the request's deadline). Queries still
    /// unanswered when it runs out are answered with an error, so the decision can say why it
    /// refuses instead of the request timing out without an answer.
    pub async fn answer(&self, snapshot: &Snapshot, queries: &[Query], budget: Duration) -> Answers {
        match self {
            Lookups::Snapshot => Answers::from_snapshot(snapshot, queries),
            Lookups::Live(live) => match tokio::time::timeout(budget, live.answer(queries)).await {
                Ok(answers) => answers,
                Err(_) => {
                    let mut answers = Answers::default();
                    for query in queries {
                        let why = format!(
                            "{query}: the API server did not answer within the request deadline ({} ms)",
                            budget.as_millis()
                        );
                        answers.insert(query.clone(), Err(why));
                    }
                    answers
                }
            },
        }
    }
}
