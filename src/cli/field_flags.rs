//! The agent-field flags of `register` and `update`, built from the field
//! table (`agentlog::model::fields`) and flattened into each command's clap
//! arguments: a field has a flag where its table entry declares one, with
//! the value parser of its kind and its place in `--help`, and nowhere
//! else. `register` offers the registration fields with a `register` flag;
//! `update` offers the `FieldUpdates` fields with an `update` flag.

use super::args::time;
use agentlog::model::fields::{field, FieldKind, FieldValue, Flag, AGENT_FIELDS};
use agentlog::model::HostMode;
use agentlog::registry::{FieldUpdates, Registration};
use clap::builder::ValueParser;
use clap::{value_parser, Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use std::marker::PhantomData;

/// Which command's flags: the fields it offers, in table order.
pub trait FlagSet {
    fn flags() -> Vec<(&'static str, FieldKind, Flag)>;
}

/// `register`'s field flags.
#[derive(Debug, Clone, Copy)]
pub struct Register;

impl FlagSet for Register {
    fn flags() -> Vec<(&'static str, FieldKind, Flag)> {
        AGENT_FIELDS
            .iter()
            .filter_map(|f| Some((f.name, f.kind, f.register?)))
            .collect()
    }
}

/// `update`'s field flags.
#[derive(Debug, Clone, Copy)]
pub struct Update;

impl FlagSet for Update {
    fn flags() -> Vec<(&'static str, FieldKind, Flag)> {
        FieldUpdates::FIELDS
            .iter()
            .filter_map(|f| Some((f.name, f.kind, f.flag?)))
            .collect()
    }
}

/// The field flags given on one command line, as (field, value).
#[derive(Debug, Clone)]
pub struct FieldFlags<S> {
    given: Vec<(&'static str, FieldValue)>,
    set: PhantomData<S>,
}

impl FieldFlags<Register> {
    /// Sets each given field in `reg`.
    pub fn apply_to(self, reg: &mut Registration) {
        for (name, value) in self.given {
            if let Some(f) = field(name) {
                f.set_in_registration(reg, Some(value));
            }
        }
    }
}

impl FieldFlags<Update> {
    /// The updates the flags ask for (each given field set, none cleared).
    pub fn into_updates(self) -> FieldUpdates {
        let mut updates = FieldUpdates::default();
        for (name, value) in self.given {
            if let Some(f) = FieldUpdates::FIELDS.iter().find(|f| f.name == name) {
                f.set(&mut updates, Some(value));
            }
        }
        updates
    }
}

fn flag_arg(name: &'static str, kind: FieldKind, flag: Flag) -> Arg {
    let parser: ValueParser = match kind {
        FieldKind::Text | FieldKind::Str => value_parser!(String),
        FieldKind::U32 => value_parser!(u32).into(),
        FieldKind::U64 => value_parser!(u64).into(),
        FieldKind::HostMode => value_parser!(HostMode).into(),
        FieldKind::Time => ValueParser::new(time),
    };
    let arg = Arg::new(name)
        .long(name.replace('_', "-"))
        .value_name(flag.value_name)
        .value_parser(parser)
        .action(ArgAction::Set)
        .display_order(flag.order);
    match flag.help {
        Some(help) => arg.help(help),
        None => arg,
    }
}

fn given_value(m: &ArgMatches, name: &str, kind: FieldKind) -> Option<FieldValue> {
    match kind {
        FieldKind::Text | FieldKind::Str => {
            m.get_one::<String>(name).cloned().map(FieldValue::Text)
        }
        FieldKind::U32 => m.get_one::<u32>(name).copied().map(FieldValue::U32),
        FieldKind::U64 => m.get_one::<u64>(name).copied().map(FieldValue::U64),
        FieldKind::HostMode => m
            .get_one::<HostMode>(name)
            .copied()
            .map(FieldValue::HostMode),
        FieldKind::Time => m
            .get_one::<agentlog::time::Timestamp>(name)
            .copied()
            .map(FieldValue::Time),
    }
}

impl<S: FlagSet> FromArgMatches for FieldFlags<S> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = FieldFlags {
            given: Vec::new(),
            set: PhantomData,
        };
        flags.update_from_arg_matches(m)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for (name, kind, _) in S::flags() {
            if let Some(value) = given_value(m, name, kind) {
                self.given.retain(|(n, _)| *n != name);
                self.given.push((name, value));
            }
        }
        Ok(())
    }
}

impl<S: FlagSet> Args for FieldFlags<S> {
    fn augment_args(cmd: Command) -> Command {
        S::flags().into_iter().fold(cmd, |cmd, (name, kind, flag)| {
            cmd.arg(flag_arg(name, kind, flag))
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}
