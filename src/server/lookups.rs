//! Where a webhook's `queries` are answered: from the cluster snapshot (folder mode) or by the API
//! server (live mode). One type, so the request path is the same in both modes.

use std::time::Duration;

use crate::cluster::live::LiveLookups;
use crate::cluster::{Answers, Query, Snapshot};

pub enum Lookups {
    /// Folder mode: the folder is the whole cluster, so lookups read the snapshot.
    Snapshot,
    /// Live mode: pods, PVCs and custom resources are asked of the API server, never cached.
    Live(LiveLookups),
}

impl Lookups {
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
