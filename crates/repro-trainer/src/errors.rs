//! Errors of the trainer crate.

use thiserror::Error;

/// What can go wrong between a model and its flat buffer.
#[derive(Debug, Error)]
pub enum TrainerError {
    #[error("flat buffer has {got} values but the model has {expected} parameters")]
    FlatLength { expected: usize, got: usize },
    #[error("parameter `{name}` has dtype {kind:?}; only f32 parameters can be exchanged")]
    NotF32 { name: String, kind: tch::Kind },
    #[error("unknown model `{name}`; use logistic, mlp, lenet, resnet8/20/32/44/56/110 or vgg16")]
    UnknownModel { name: String },
    #[error("libtorch failed")]
    Torch(#[from] tch::TchError),
}
