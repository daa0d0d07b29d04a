//! A model's trainable parameters as one flat `f32` buffer, the unit every
//! algorithm and codec works on.
//!
//! Layout: the trainable variables of a `VarStore` sorted by name, each
//! flattened in row-major order, concatenated. Sorting by name makes the
//! layout identical on every rank regardless of hash-map order. Buffers that
//! are not trainable (batch-norm running statistics) are not part of it: they
//! stay local to each worker.

use tch::{Device, Kind, Tensor, nn::VarStore};

use crate::TrainerError;

/// The flat layout of a model's trainable parameters.
#[derive(Debug)]
pub struct FlatParams {
    /// (name, variable, offset, numel), sorted by name.
    entries: Vec<(String, Tensor, usize, usize)>,
    len: usize,
}

impl FlatParams {
    /// The layout of `vs`'s trainable variables.
    pub fn new(vs: &VarStore) -> Result<Self, TrainerError> {
        let mut vars: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let mut entries = Vec::with_capacity(vars.len());
        let mut offset = 0;
        for (name, t) in vars {
            let kind = t.f_kind()?;
            if kind != Kind::Float {
                return Err(TrainerError::NotF32 { name, kind });
            }
            let numel = t.numel();
            entries.push((name, t, offset, numel));
            offset += numel;
        }
        Ok(Self {
            entries,
            len: offset,
        })
    }

    /// Number of parameters `d`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The device the parameters live on (the CPU for a model without any).
    pub fn device(&self) -> Device {
        self.entries
            .first()
            .map_or(Device::Cpu, |(_, t, _, _)| t.device())
    }

    /// Whether the model has no trainable parameters.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Names and ranges of the parameters in the buffer.
    pub fn layout(&self) -> impl Iterator<Item = (&str, std::ops::Range<usize>)> {
        self.entries
            .iter()
            .map(|(n, _, o, k)| (n.as_str(), *o..*o + *k))
    }

    /// Copies the parameters into `out` (`len()` values).
    pub fn gather(&self, out: &mut [f32]) -> Result<(), TrainerError> {
        self.check(out.len())?;
        for (_, t, offset, numel) in &self.entries {
            let host = t.f_detach()?.f_to_device(Device::Cpu)?.f_contiguous()?;
            host.f_copy_data(&mut out[*offset..*offset + *numel], *numel)?;
        }
        Ok(())
    }

    /// Copies the parameters' gradients into `out` (`len()` values); a
    /// parameter without a gradient contributes zeros.
    pub fn gather_grad(&self, out: &mut [f32]) -> Result<(), TrainerError> {
        self.check(out.len())?;
        for (_, t, offset, numel) in &self.entries {
            let dst = &mut out[*offset..*offset + *numel];
            let grad = t.grad();
            if grad.defined() {
                let host = grad.f_to_device(Device::Cpu)?.f_contiguous()?;
                host.f_copy_data(dst, *numel)?;
            } else {
                dst.fill(0.0);
            }
        }
        Ok(())
    }

    /// Overwrites the parameters with `values` (`len()` values), without
    /// recording the copy in autograd.
    pub fn scatter(&self, values: &[f32]) -> Result<(), TrainerError> {
        self.check(values.len())?;
        tch::no_grad(|| -> Result<(), TrainerError> {
            for (_, t, offset, numel) in &self.entries {
                let src = Tensor::f_from_slice(&values[*offset..*offset + *numel])?
                    .f_to_device(t.device())?
                    .f_view(t.size().as_slice())?;
                let mut dst = t.shallow_clone();
                dst.f_copy_(&src)?;
            }
            Ok(())
        })
    }

    fn check(&self, got: usize) -> Result<(), TrainerError> {
        if got == self.len {
            Ok(())
        } else {
            Err(TrainerError::FlatLength {
                expected: self.len,
                got,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::{self, Module};

    fn model(vs: &VarStore) -> nn::Sequential {
        let root = vs.root();
        nn::seq()
            .add(nn::linear(&root / "b_first", 3, 4, Default::default()))
            .add(nn::linear(&root / "a_second", 4, 2, Default::default()))
    }

    #[test]
    fn layout_is_sorted_by_name_and_covers_every_parameter() {
        let vs = VarStore::new(Device::Cpu);
        let _m = model(&vs);
        let flat = FlatParams::new(&vs).unwrap();
        assert_eq!(flat.len(), 3 * 4 + 4 + 4 * 2 + 2);
        let names: Vec<&str> = flat.layout().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "a_second.bias",
                "a_second.weight",
                "b_first.bias",
                "b_first.weight"
            ]
        );
        let ranges: Vec<_> = flat.layout().map(|(_, r)| r).collect();
        assert_eq!(ranges[0], 0..2);
        assert_eq!(ranges[3], 14..26);
    }

    #[test]
    fn scatter_then_gather_round_trips_and_changes_the_model() {
        let vs = VarStore::new(Device::Cpu);
        let m = model(&vs);
        let flat = FlatParams::new(&vs).unwrap();
        let values: Vec<f32> = (0..flat.len()).map(|i| i as f32 * 0.01 - 0.1).collect();
        flat.scatter(&values).unwrap();
        let mut back = vec![0.0; flat.len()];
        flat.gather(&mut back).unwrap();
        assert_eq!(back, values);
        // the model really computes with the new weights: zero them, output is zero
        flat.scatter(&vec![0.0; flat.len()]).unwrap();
        let y = m.forward(&Tensor::ones([1, 3], (Kind::Float, Device::Cpu)));
        assert_eq!(y.abs().sum(Kind::Float).double_value(&[]), 0.0);
        // and the parameters still train
        assert!(vs.trainable_variables().iter().all(|t| t.requires_grad()));
    }

    #[test]
    fn gradients_gather_in_the_same_layout() {
        let vs = VarStore::new(Device::Cpu);
        let m = model(&vs);
        let flat = FlatParams::new(&vs).unwrap();
        let mut g = vec![1.0; flat.len()];
        flat.gather_grad(&mut g).unwrap();
        assert!(g.iter().all(|&v| v == 0.0), "no backward yet: zeros");
        let y = m.forward(&Tensor::ones([1, 3], (Kind::Float, Device::Cpu)));
        y.sum(Kind::Float).backward();
        flat.gather_grad(&mut g).unwrap();
        // d(sum of outputs)/d(bias of the last layer) = 1 for each of its 2 entries
        let (_, bias) = flat.layout().find(|(n, _)| *n == "a_second.bias").unwrap();
        assert_eq!(&g[bias], &[1.0, 1.0]);
    }

    #[test]
    fn wrong_length_is_an_error() {
        let vs = VarStore::new(Device::Cpu);
        let _m = model(&vs);
        let flat = FlatParams::new(&vs).unwrap();
        let err = flat.scatter(&[0.0; 3]).unwrap_err();
        assert!(matches!(
            err,
            TrainerError::FlatLength {
                expected: 26,
                got: 3
            }
        ));
        assert!(flat.gather(&mut [0.0; 30]).is_err());
    }
}
