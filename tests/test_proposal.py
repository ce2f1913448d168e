"""Proposal sampling (inr_enc/nerfstudio/proposal.py): packed samples, the proposal fields learning a toy scene
whose answer is known (a slab of density), and the model trained with ``sampler="proposal"``."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("nerfstudio")
from nerfstudio.cameras.rays import RayBundle  # noqa: E402
from nerfstudio.data.scene_box import SceneBox  # noqa: E402

from inr_enc.nerf.occupancy import OccupancyGrid  # noqa: E402
from inr_enc.nerfstudio.model import InrNerfModelConfig  # noqa: E402
from inr_enc.nerfstudio.proposal import ProposalSampling  # noqa: E402
from inr_enc.nerfstudio.sampling import ray_limits  # noqa: E402

BOX = torch.tensor([[-1.5] * 3, [1.5] * 3])
SLAB = (-0.2, 0.2)  # the toy scene: density only where -0.2 < x < 0.2


def rays_along_x(n: int, generator: torch.Generator) -> RayBundle:
    """n rays from x = -4 towards +x, spread in y and z over [-1, 1]."""
    origins = torch.cat([torch.full((n, 1), -4.0), torch.rand(n, 2, generator=generator) * 2 - 1], -1)
    directions = torch.nn.functional.normalize(torch.tensor([1.0, 0.0, 0.0]) + 0.05 * torch.randn(
        n, 3, generator=generator), dim=-1)
    return RayBundle(origins=origins, directions=directions, pixel_area=torch.full((n, 1), 1e-4),
                     camera_indices=torch.zeros(n, 1, dtype=torch.long))


def slab_weights(ray_bundle: RayBundle, starts: torch.Tensor, ends: torch.Tensor, n: int, s: int) -> torch.Tensor:
    """The reference renderer's weights [M]: an opaque slab (density 50) between the SLAB planes, empty elsewhere."""
    mid = (starts + ends) / 2
    x = ray_bundle.origins[:, :1] + ray_bundle.directions[:, :1] * mid.view(n, s)
    density = torch.where((x > SLAB[0]) & (x < SLAB[1]), 50.0, 0.0)
    tau = density * (ends - starts).view(n, s)
    before = torch.cumsum(tau, -1) - tau
    return (torch.exp(-before) * (1 - torch.exp(-tau))).reshape(-1)


def test_samples_are_packed_per_ray_in_order_between_near_and_far():
    proposal = ProposalSampling(BOX, None, "torch", (16, 8), samples_per_ray=6)
    bundle = ray_limits(rays_along_x(5, torch.Generator().manual_seed(0)), OccupancyGrid(BOX, 8, 0.01))
    rays, starts, ends = proposal.sample(bundle)
    assert rays.tolist() == [i for i in range(5) for _ in range(6)]
    assert (starts < ends).all() and (starts[1:] >= ends[:-1] - 1e-6)[rays[1:] == rays[:-1]].all()
    near, far = bundle.nears.reshape(-1)[rays], bundle.fars.reshape(-1)[rays]
    assert (starts >= near - 1e-5).all() and (ends <= far + 1e-5).all()
    assert torch.allclose(near[::6], torch.full((5,), 2.5), atol=0.1)  # the box's face at x = -1.5, 4 - 1.5 away


def test_rendering_takes_the_render_counts_and_training_the_training_counts():
    proposal = ProposalSampling(BOX, None, "torch", (16, 8), samples_per_ray=6, render_samples=((5, 4), 3))
    bundle = ray_limits(rays_along_x(5, torch.Generator().manual_seed(0)), OccupancyGrid(BOX, 8, 0.01))
    evaluated = []
    for level in proposal.fields:  # count the points each proposal field is asked for
        level.density_fn = lambda x, f=level.density_fn: evaluated.append(x.shape[:-1].numel()) or f(x)
    for training, per_level, per_ray in ((False, [5, 4], 3), (True, [16, 8], 6)):
        proposal.train(training)
        evaluated.clear()
        rays, starts, ends = proposal.sample(bundle)
        assert rays.tolist() == [i for i in range(5) for _ in range(per_ray)]
        assert evaluated == [5 * count for count in per_level]
        assert (starts < ends).all() and (starts[1:] >= ends[:-1] - 1e-6)[rays[1:] == rays[:-1]].all()
    with pytest.raises(ValueError, match=r"render_samples needs 2 levels, got \(64,\)"):
        ProposalSampling(BOX, None, "torch", (16, 8), render_samples=((64,), 32))


def test_proposal_fields_learn_where_a_slab_of_density_is():
    torch.manual_seed(0)
    proposal = ProposalSampling(BOX, None, "torch", (32, 16), samples_per_ray=16)
    optimizer = torch.optim.Adam(proposal.parameters(), lr=1e-2, eps=1e-15)
    generator, grid = torch.Generator().manual_seed(1), OccupancyGrid(BOX, 8, 0.01)

    def fraction_in_slab(step: int) -> float:
        proposal.anneal(step)
        bundle = ray_limits(rays_along_x(256, generator), grid)
        rays, starts, ends = proposal.sample(bundle)
        x = bundle.origins[rays, 0] + bundle.directions[rays, 0] * (starts + ends) / 2
        loss = proposal.losses(slab_weights(bundle, starts, ends, 256, 16), 256, distortion=False)["interlevel"]
        if loss.requires_grad:  # the sampler trains its fields on some steps only (nerfacto's schedule)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        proposal.sampler.step_cb(step)
        return float(((x > SLAB[0] - 0.1) & (x < SLAB[1] + 0.1)).float().mean())

    before = fraction_in_slab(0)  # uniform over the box's 3 units: about 0.6 / 3 = 0.2
    for step in range(1, 100):
        after = fraction_in_slab(step)
    assert before < 0.3 and after > 0.7, (before, after)


def test_model_trains_its_proposal_fields_through_the_interlevel_loss():
    torch.manual_seed(0)
    model = InrNerfModelConfig(sampler="proposal", proposal_samples=(16, 8), proposal_samples_per_ray=8,
                               encoding={"otype": "HashGrid", "n_levels": 4, "log2_hashmap_size": 12,
                                         "base_resolution": 4}).setup(scene_box=SceneBox(aabb=BOX), num_train_data=1)
    groups = model.get_param_groups()
    proposal_params = list(model.proposal.parameters())
    grouped = [p for params in groups.values() for p in params]
    assert all(any(p is q for q in grouped) for p in proposal_params)
    bundle = rays_along_x(32, torch.Generator().manual_seed(2))
    outputs = model(bundle)
    assert outputs["num_samples_per_ray"].eq(8).all()
    losses = model.get_loss_dict(outputs, {"image": torch.rand(32, 3)})
    assert set(losses) >= {"rgb_loss", "interlevel_loss"} and all(v.isfinite() for v in losses.values())
    sum(losses.values()).backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in proposal_params)


@pytest.mark.parametrize("settings", [{"proposal_samples": ()}, {"proposal_samples": (64, 0)},
                                      {"proposal_samples_per_ray": 0}, {"proposal_render_samples": (64,)},
                                      {"proposal_render_samples": (0, 32)}, {"proposal_render_samples_per_ray": 0}])
def test_bad_proposal_settings_are_refused(settings):
    with pytest.raises(ValueError, match="proposal_(render_)?samples"):
        InrNerfModelConfig(sampler="proposal", **settings)
