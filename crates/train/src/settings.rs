//! `--set KEY=VALUE` on a TOML document: the one rule by which `lsr train` changes a cell's
//! config and `lsr matrix` a matrix file for one invocation.

use toml::{Table, Value};

/// Applies `assignment` to `document`. KEY is a TOML key (dotted, quoted parts allowed); an
/// array of tables (`[[backbone]]`) is entered by the `name` of an entry, as in
/// `backbone.bert.checkpoint`. A VALUE that is not TOML is a string, so `device=cuda` needs no
/// quotes. A later assignment of the same key wins. Errors say what was expected; the caller
/// names the assignment and the file.
pub fn set(document: &mut Table, assignment: &str) -> Result<(), String> {
    let change = parse(assignment)?;
    merge(document, change, &mut Vec::new())
}

/// `recipe.lr=2e-3` as the table `{recipe: {lr: 2e-3}}`, TOML's own parser reading the key.
fn parse(assignment: &str) -> Result<Table, String> {
    let (key, value) = (assignment.split_once('='))
        .ok_or_else(|| "expected KEY=VALUE, e.g. recipe.lr=2e-3".to_string())?;
    let key = key.trim();
    let line = |value: &str| format!("{key} = {value}").parse::<Table>();
    line("0").map_err(|e| format!("`{key}` is not a TOML key: {}", e.message().trim()))?;
    match line(value.trim()) {
        Ok(table) => Ok(table),
        Err(_) => Ok(line(&Value::String(value.to_string()).to_string()).expect("a string")),
    }
}

/// Merges `change` into `target`: tables key by key, an array of tables by the `name` of its
/// entries, a missing key or a value replaced.
fn merge(target: &mut Table, change: Table, at: &mut Vec<String>) -> Result<(), String> {
    for (key, value) in change {
        at.push(key.clone());
        match (target.get_mut(&key), value) {
            (Some(Value::Table(inner)), Value::Table(change)) => merge(inner, change, at)?,
            (Some(Value::Array(entries)), Value::Table(change)) => by_name(entries, change, at)?,
            (Some(_), Value::Table(_)) => {
                return Err(format!("`{}` is a value, not a table", at.join(".")));
            }
            (_, value) => {
                target.insert(key, value);
            }
        }
        at.pop();
    }
    Ok(())
}

/// `change`'s keys are the names of entries of the array of tables `entries`.
fn by_name(entries: &mut [Value], change: Table, at: &mut Vec<String>) -> Result<(), String> {
    let name_of = |entry: &Value| {
        entry
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    for (name, value) in change {
        let names: Vec<String> = entries.iter().filter_map(name_of).collect();
        let path = at.join(".");
        let entry = (entries.iter_mut())
            .find(|entry| name_of(entry).as_deref() == Some(name.as_str()))
            .ok_or_else(|| {
                format!(
                    "no [[{path}]] named `{name}`; there are {}",
                    names.join(", ")
                )
            })?;
        let (Value::Table(entry), Value::Table(change)) = (entry, value) else {
            return Err(format!(
                "`{path}.{name}` takes keys, e.g. {path}.{name}.checkpoint"
            ));
        };
        at.push(name);
        merge(entry, change, at)?;
        at.pop();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
name = "mini"
k = [1, 4]

[recipe]
lr = 1e-3
dropout = true

[[backbone]]
name = "bert"
checkpoint = "models/bert"

[[backbone]]
name = "gte"
checkpoint = "models/gte"
"#;

    fn apply(assignments: &[&str]) -> Result<Table, String> {
        let mut document: Table = FILE.parse().unwrap();
        for assignment in assignments {
            set(&mut document, assignment)?;
        }
        Ok(document)
    }

    #[test]
    fn sets_keys_at_any_depth_and_array_entries_by_name() {
        let table = apply(&[
            "recipe.dropout=false",
            "recipe.lr = 2e-3",
            "k=[1, 2, 4]",
            "device=cuda",
            "eval.precision=\"bf16-mixed\"",
            "probe.fraction=0.2",
            "backbone.gte.checkpoint=other/gte",
            "'quoted.key'.x=1",
            "recipe.lr=5e-4",
        ])
        .unwrap();
        assert_eq!(table["recipe"]["dropout"].as_bool(), Some(false));
        assert_eq!(
            table["recipe"]["lr"].as_float(),
            Some(5e-4),
            "the later one wins"
        );
        assert_eq!(table["k"].as_array().unwrap().len(), 3);
        assert_eq!(table["device"].as_str(), Some("cuda"));
        assert_eq!(table["eval"]["precision"].as_str(), Some("bf16-mixed"));
        assert_eq!(table["probe"]["fraction"].as_float(), Some(0.2));
        assert_eq!(table["quoted.key"]["x"].as_integer(), Some(1));
        let backbones = table["backbone"].as_array().unwrap();
        assert_eq!(backbones[0]["checkpoint"].as_str(), Some("models/bert"));
        assert_eq!(backbones[1]["checkpoint"].as_str(), Some("other/gte"));
    }

    #[test]
    fn mistakes_say_what_was_expected() {
        for (assignment, expected) in [
            ("recipe.lr", "expected KEY=VALUE"),
            ("recipe..lr=1", "not a TOML key"),
            ("name.x=1", "`name` is a value, not a table"),
            (
                "backbone.ettin.checkpoint=x",
                "no [[backbone]] named `ettin`; there are bert, gte",
            ),
            ("backbone.bert=x", "`backbone.bert` takes keys"),
        ] {
            let error = apply(&[assignment]).unwrap_err();
            assert!(error.contains(expected), "{assignment}: {error}");
        }
    }
}
