//! How the command line spells the driver's own values: clap's
//! `ValueEnum` for the types of the stages below `cmd/`, which never see
//! clap. Each name is the type's one spelling (`Backend::name`,
//! `Dataset::name`, `ImageFormat::extension`); the help is the command
//! line's.

use clap::ValueEnum;
use clap::builder::PossibleValue;

use crate::experiment::data::Dataset;
use crate::experiment::manifest::Backend;
use crate::report::plot::ImageFormat;

impl ValueEnum for Backend {
    fn value_variants<'a>() -> &'a [Self] {
        &Backend::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let value = PossibleValue::new(self.name());
        Some(match self {
            Backend::Sim => value.help("The in-process simulator with a virtual clock"),
            Backend::Mpi => value.help("MPI ranks running the trainer"),
            Backend::InProcess => value
                .alias("local")
                .help("The trainer's workers as threads of one process, the network modelled by a virtual clock"),
        })
    }
}

impl ValueEnum for Dataset {
    fn value_variants<'a>() -> &'a [Self] {
        &Dataset::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            Dataset::Cifar10 => "CIFAR-10, binary version (for the paper-scale experiments)",
            Dataset::FashionMnist => {
                "Fashion-MNIST (the CPU-scale experiments; Debian also ships it as the package `dataset-fashion-mnist`)"
            }
            Dataset::Epsilon => {
                "LIBSVM's epsilon (normalized), training and test sets: 400,000 and 100,000 dense samples of 2,000 features, bzip2 (about 12 GB as text)"
            }
            Dataset::EpsilonLike => {
                "A generated stand-in of epsilon's width, written here: 20,000 unit samples of 2,000 dense features, labels from a planted model with noise (the CPU-scale convex benchmark)"
            }
            Dataset::Cifar10Like => {
                "A generated stand-in in CIFAR-10's binary format, written here, for rehearsing the paper-scale runs where CIFAR-10 cannot be fetched: their accuracy means nothing"
            }
            Dataset::Libsvm => "Any LIBSVM file: `--url` and its `--sha256`",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl ValueEnum for ImageFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[ImageFormat::Svg, ImageFormat::Png]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.extension()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest, the command line and the records spell a backend the
    /// same: `name()` reads back through serde and clap.
    #[test]
    fn every_backend_reads_back_from_its_name() {
        for b in Backend::value_variants() {
            let yaml: Backend = yaml_serde::from_str(b.name()).unwrap();
            assert_eq!(yaml, *b);
            assert_eq!(Backend::from_str(b.name(), false), Ok(*b));
        }
        assert_eq!(Backend::from_str("local", false), Ok(Backend::InProcess));
    }

    /// Every data set and image format reads back from its one spelling.
    #[test]
    fn every_dataset_and_format_reads_back_from_its_name() {
        for d in Dataset::value_variants() {
            assert_eq!(Dataset::from_str(d.name(), false), Ok(*d));
        }
        assert_eq!(
            Dataset::from_str("fashion-mnist", false),
            Ok(Dataset::FashionMnist)
        );
        assert_eq!(
            Dataset::from_str("cifar10-like", false),
            Ok(Dataset::Cifar10Like)
        );
        for f in ImageFormat::value_variants() {
            assert_eq!(ImageFormat::from_str(f.extension(), false), Ok(*f));
        }
    }
}
