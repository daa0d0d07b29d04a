//! Minibatches as tensors: normalization, and CIFAR's standard augmentation
//! (zero-pad by 4, random 32x32 crop, random horizontal flip).

use repro_algos::rng::Rng;
use tch::{Device, Kind, Tensor};

use super::ImageSet;

/// Per-channel normalization and augmentation of one data set.
#[derive(Debug, Clone, PartialEq)]
pub struct Transform {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    /// Pad by this many pixels and crop back at a random offset (0: none).
    pub crop_pad: usize,
    pub flip: bool,
}

impl Transform {
    /// CIFAR-10 training: the usual channel statistics, pad 4 + crop, flip.
    pub fn cifar10_train() -> Self {
        Self {
            mean: vec![0.4914, 0.4822, 0.4465],
            std: vec![0.2470, 0.2435, 0.2616],
            crop_pad: 4,
            flip: true,
        }
    }

    /// CIFAR-10 evaluation: normalization only.
    pub fn cifar10_test() -> Self {
        Self {
            crop_pad: 0,
            flip: false,
            ..Self::cifar10_train()
        }
    }

    /// Fashion-MNIST: normalization only.
    pub fn fashion_mnist() -> Self {
        Self {
            mean: vec![0.2860],
            std: vec![0.3530],
            crop_pad: 0,
            flip: false,
        }
    }

    /// Builds the batch of images `indices` as an `[n, C, H, W]` f32 tensor
    /// and their labels as `[n]` i64, on `device`. `rng` drives augmentation.
    pub fn batch(
        &self,
        set: &ImageSet,
        indices: &[usize],
        rng: &mut Rng,
        device: Device,
    ) -> (Tensor, Tensor) {
        let (c, h, w) = (set.channels, set.height, set.width);
        let mut out = vec![0f32; indices.len() * c * h * w];
        for (b, &i) in indices.iter().enumerate() {
            let image = set.image(i);
            let dst = &mut out[b * c * h * w..(b + 1) * c * h * w];
            let (dy, dx) = if self.crop_pad > 0 {
                let span = 2 * self.crop_pad + 1;
                (
                    rng.below(span) as isize - self.crop_pad as isize,
                    rng.below(span) as isize - self.crop_pad as isize,
                )
            } else {
                (0, 0)
            };
            let flip = self.flip && rng.below(2) == 1;
            for ch in 0..c {
                let (mean, std) = (
                    self.mean[ch.min(self.mean.len() - 1)],
                    self.std[ch.min(self.std.len() - 1)],
                );
                // zero padding is zero *before* normalization, as torchvision pads the raw image
                let pad_value = -mean / std;
                for y in 0..h {
                    let sy = y as isize + dy;
                    for x in 0..w {
                        let sx0 = if flip { w - 1 - x } else { x } as isize + dx;
                        let v = if sy >= 0 && sy < h as isize && sx0 >= 0 && sx0 < w as isize {
                            let p = image[ch * h * w + sy as usize * w + sx0 as usize];
                            (f32::from(p) / 255.0 - mean) / std
                        } else {
                            pad_value
                        };
                        dst[ch * h * w + y * w + x] = v;
                    }
                }
            }
        }
        let images = Tensor::from_slice(&out)
            .view([indices.len() as i64, c as i64, h as i64, w as i64])
            .to_device(device);
        let labels: Vec<i64> = indices.iter().map(|&i| i64::from(set.labels[i])).collect();
        (
            images,
            Tensor::from_slice(&labels)
                .to_kind(Kind::Int64)
                .to_device(device),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> ImageSet {
        // 2 images of 1x3x3: 0..9 and 10..19 (as pixel values x 10)
        ImageSet {
            pixels: (0..18).map(|p| (p * 10) as u8).collect(),
            labels: vec![3, 7],
            channels: 1,
            height: 3,
            width: 3,
        }
    }

    fn plain() -> Transform {
        Transform {
            mean: vec![0.0],
            std: vec![1.0 / 255.0],
            crop_pad: 0,
            flip: false,
        }
    }

    fn values(t: &Tensor) -> Vec<f32> {
        let t = t.flatten(0, -1);
        let mut v = vec![0f32; t.numel()];
        t.copy_data(&mut v, t.numel());
        // undo the float error of dividing by 1/255
        v.iter().map(|x| x.round() + 0.0).collect()
    }

    #[test]
    fn normalization_and_labels() {
        let (x, y) = plain().batch(&set(), &[1, 0], &mut Rng::new(0, 0), Device::Cpu);
        assert_eq!(x.size(), vec![2, 1, 3, 3]);
        let v = values(&x);
        assert_eq!(&v[..3], &[90.0, 100.0, 110.0]);
        assert_eq!(&v[9..12], &[0.0, 10.0, 20.0]);
        assert_eq!(Vec::<i64>::try_from(&y).unwrap(), vec![7, 3]);
    }

    #[test]
    fn flips_and_crops_move_pixels_and_pad_with_zero() {
        let t = Transform {
            flip: true,
            crop_pad: 1,
            ..plain()
        };
        let mut rng = Rng::new(5, 0);
        let mut seen_flip = false;
        let mut seen_pad = false;
        for _ in 0..50 {
            let v = values(&t.batch(&set(), &[0], &mut rng, Device::Cpu).0);
            // every output pixel is an input pixel or padding
            assert!(
                v.iter()
                    .all(|&p| p == 0.0 || ((p as u32).is_multiple_of(10) && p <= 80.0)),
                "{v:?}"
            );
            seen_pad |= v.iter().filter(|&&p| p == 0.0).count() > 1;
            seen_flip |= v[..3] == [20.0, 10.0, 0.0];
        }
        assert!(seen_flip && seen_pad);
    }
}
