//! A subset of an experiment's grid. Where the command line restricts a
//! grid key (`--set 'grid.method=[d-psgd]'`), the tuning space, the claims
//! and the table's reference row that read a value it left out are
//! dropped, each said, so the subset plans without further overrides.
//! `repro run` and every reader narrow the same way.

use std::collections::{BTreeMap, BTreeSet};

use crate::experiment::manifest::Manifest;
use crate::experiment::plan;

/// The grid keys `overrides` restrict (`grid.method=[...]`).
fn restricted(overrides: &[String]) -> Vec<String> {
    overrides
        .iter()
        .filter_map(|o| o.split_once('=').map(|(k, _)| k.trim()))
        .filter_map(|k| k.strip_prefix("grid."))
        .filter(|k| !k.contains('.'))
        .map(str::to_string)
        .collect()
}

/// Whether `overrides` restrict a grid key, so that [`narrow`] may drop
/// something.
pub(crate) fn restricts(overrides: &[String]) -> bool {
    !restricted(overrides).is_empty()
}

/// Narrows `m` to the grid points `points` keep of each grid key the
/// `overrides` restrict; a note for each part dropped.
pub(crate) fn narrow(
    m: &mut Manifest,
    overrides: &[String],
    points: &[BTreeMap<String, String>],
) -> Vec<String> {
    let kept: BTreeMap<String, BTreeSet<String>> = restricted(overrides)
        .into_iter()
        .map(|k| {
            let values = points.iter().filter_map(|p| p.get(&k).cloned()).collect();
            (k, values)
        })
        .collect();
    let mut notes = Vec::new();
    if kept.is_empty() {
        return notes;
    }
    if let Some(t) = &mut m.tune
        && let Some(values) = kept.get(&t.key)
    {
        let gone: Vec<String> = t
            .space
            .keys()
            .filter(|v| !values.contains(*v))
            .cloned()
            .collect();
        for v in &gone {
            t.space.remove(v);
        }
        if let Some(w) = t.compare_with.take_if(|w| gone.contains(&w.method)) {
            notes.push(format!(
                "tune.compare_with: dropped ({} is left out)",
                w.method
            ));
        }
        if !gone.is_empty() {
            notes.push(format!(
                "tune.space: dropped {} (`--set grid.{}` leaves them out)",
                gone.join(", "),
                t.key
            ));
        }
    }
    let table = m.table.clone();
    let before = m.claims.len();
    let mut dropped = Vec::new();
    let mut i = 0;
    m.claims.retain(|c| {
        let left = crate::report::claims::reads_left_out(c, &table, &kept);
        if let Some(kv) = &left {
            dropped.push(format!("claims[{i}] ({kv})"));
        }
        i += 1;
        left.is_none()
    });
    if !dropped.is_empty() {
        notes.push(format!(
            "claims: dropped {} of {before}, each reads a value the grid no longer has: {}",
            dropped.len(),
            dropped.join(", ")
        ));
    }
    if let Some(r) = &m.table.reference
        && let Some((k, v)) = r
            .iter()
            .map(|(k, v)| (k, plan::text(v)))
            .find(|(k, v)| kept.get(*k).is_some_and(|values| !values.contains(v)))
    {
        notes.push(format!(
            "table.reference dropped: its row `{k}={v}` is not in the grid"
        ));
        m.table.reference = None;
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_grid_key_the_command_line_sets_narrows() {
        assert_eq!(
            restricted(&[
                "grid.method=[d-psgd]".into(),
                "params.lr=0.1".into(),
                "grid.method.x=1".into(),
            ]),
            vec!["method".to_string()]
        );
    }
}
