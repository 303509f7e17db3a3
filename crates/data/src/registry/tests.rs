//! The registry's tests: each name names one set, sets and groups are found by every name,
//! each set is read where its downloads install them and is pinned (NanoBEIR by commit too),
//! an unknown name is refused with the known ones.

use std::collections::HashSet;
use std::path::Path;

use super::*;
use crate::datasets::Dataset;

#[test]
fn names_ids_and_aliases_each_name_one_set() {
    let mut seen = HashSet::new();
    for set in REGISTRY.iter() {
        let mut own = HashSet::new();
        let names = std::iter::once(&set.name)
            .chain(&set.ir_datasets)
            .chain(&set.aliases);
        for name in names.map(|n| n.to_ascii_lowercase()) {
            if own.insert(name.clone()) {
                assert!(seen.insert(name.clone()), "`{name}` names two sets");
            }
        }
    }
    for group in groups() {
        assert!(
            !seen.contains(group),
            "group `{group}` is also a set's name"
        );
    }
}

#[test]
fn every_set_is_found_by_its_name_ids_and_aliases_and_groups_have_evaluated_members() {
    for set in REGISTRY.iter() {
        let names = std::iter::once(&set.name)
            .chain(&set.ir_datasets)
            .chain(&set.aliases);
        for name in names {
            let found = fetched(name).unwrap_or_else(|e| panic!("`{name}`: {e}"));
            assert_eq!(found.len(), 1, "{name}");
            assert_eq!(found[0].name, set.name, "{name}");
        }
        if let Some(evaluation) = &set.evaluation {
            assert!(
                evaluation.published_queries.is_some_and(|n| n > 0),
                "{}: no published number of evaluated queries",
                set.name
            );
            assert_eq!(
                Dataset::members(&set.name).unwrap(),
                std::slice::from_ref(&set.name)
            );
        } else {
            assert!(Dataset::members(&set.name).is_err(), "{}", set.name);
        }
    }
    for group in groups() {
        let members = Dataset::members(group).unwrap();
        assert!(!members.is_empty(), "{group}");
        for member in self::group(group) {
            assert!(member.evaluation.is_some(), "{group}: {}", member.name);
        }
    }
}

/// Where a fetch puts each file is where the set is read from, and what it downloads is
/// pinned: a new entry whose paths or digests disagree fails here.
#[test]
fn every_set_is_read_where_its_downloads_install_and_they_are_pinned() {
    for set in REGISTRY.iter() {
        assert!(!set.downloads.is_empty(), "{}: no download", set.name);
        for download in &set.downloads {
            if let Download::HubDataset { commit, .. } = download {
                let at_commit = lsr_files::provenance::is_commit(commit);
                assert!(at_commit || set.unpinned.is_some(), "{}", set.name);
            }
            if set.unpinned.is_some() && download.pinned().is_none() {
                continue;
            }
            let pinned = download
                .pinned()
                .unwrap_or_else(|| panic!("{}: {} is not pinned", set.name, download.origin()));
            assert!(
                pinned.md5.len() == 32 && pinned.md5.chars().all(|c| c.is_ascii_hexdigit()),
                "{}: {}",
                set.name,
                pinned.md5
            );
        }
        let installed: Vec<&Path> = set
            .downloads
            .iter()
            .flat_map(|d| d.destinations())
            .collect();
        let Some(evaluation) = &set.evaluation else {
            continue;
        };
        let files = [&evaluation.corpus, &evaluation.queries, &evaluation.qrels]
            .into_iter()
            .chain(&evaluation.flops_queries);
        for file in files {
            let provided = installed.iter().any(|dest| match evaluation.format {
                CorpusFormat::Parquet => dest.parent() == Some(Path::new(file)),
                _ => *dest == Path::new(file) || *dest == Path::new(&format!("{file}.gz")),
            });
            assert!(provided, "{}: no download installs {file}", set.name);
        }
    }
}

#[test]
fn an_unknown_name_is_refused_with_the_registered_names() {
    let message = evaluated("robust04").unwrap_err().to_string();
    let listed = REGISTRY
        .iter()
        .filter(|set| set.collection.is_none() && set.evaluation.is_some())
        .map(|set| set.name.as_str())
        .chain(groups())
        .chain(COLLECTIONS.iter().map(|c| c.prefix));
    for name in listed {
        assert!(message.contains(name), "{name} missing: {message}");
    }
    assert!(!message.contains(MSMARCO_TRAIN), "{message}");
    let message = fetched("robust04").unwrap_err().to_string();
    assert!(message.contains(MSMARCO_TRAIN), "{message}");
}

#[test]
fn a_set_of_a_collection_that_is_not_registered_is_read_by_its_rule_unpinned() {
    let set = find("beir/synth-a/test").unwrap();
    assert_eq!(set.name, "beir/synth-a");
    let evaluation = set.evaluation.unwrap();
    assert_eq!(evaluation.corpus, "beir/synth-a/corpus.jsonl");
    assert_eq!(evaluation.published_queries, None);
    assert!(set.downloads.iter().all(|d| d.pinned().is_none()));
    assert!(find("beir/").is_none());
    assert!(find("nanobeir/synth-a").is_none());
}

#[test]
fn every_named_group_is_pinned_nanobeir_by_commit_too() {
    let nano = pins(NANOBEIR_13).unwrap();
    assert_eq!((nano.files, nano.hub_files), (39, 39));
    assert!(nano.all_pinned(), "{nano}");
    assert_eq!(
        nano.to_string(),
        "pinned: 39 of 39 downloads by md5, 39 of 39 hub files at a commit"
    );
    for name in ["msmarco-dev", "trec-dl-2019", BEIR_13] {
        let pins = pins(name).unwrap();
        assert!(pins.all_pinned() && pins.hub_files == 0, "{name}: {pins}");
    }
}
