"""nn modules against pinned PyTorch 2.13 values: each module is built as torch.nn builds it,
its parameters and buffers set to the same deterministic values, run on deterministic
inputs; the outputs, the gradients of a fixed weighted sum of them (for every parameter and
the input) and the buffers afterwards (running statistics) must equal PyTorch's in float64.

The values were computed once with torch (float64, `torch.set_default_dtype`), by building
`torch.nn.<ctor>` exactly as written in CASES; tests never import torch.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad import nn  # noqa: F401  (the constructors below are eval'd in it)


def det(shape, k, phase, scale=1.0):
    """Deterministic values: sin(k * i + phase) over the flattened shape."""
    n = int(np.prod(shape)) if shape else 1
    return (np.sin(np.arange(n) * k + phase) * scale).reshape(shape)


CASES = {
    'conv2d': (
        'Conv2d(3, 4, 3, stride=2, padding=1)',
        [(2, 3, 7, 6)],
        {'buffers': {},
         'grads': {'bias': 0.6987023723302794,
                   'input': 5.648288016132464,
                   'weight': -1.4566590709981293},
         'head': [1.075476815639904, 0.932267669027066, -0.07295286332761823, -0.14048343900454993],
         'out': [1.4277579889524858],
         'shapes': [[2, 4, 4, 3]]},
    ),
    'conv2d_groups': (
        'Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=2, '
        'bias=False)',
        [(2, 4, 6, 7)],
        {'buffers': {},
         'grads': {'input': 3.485216761781855, 'weight': 0.9415651546622126},
         'head': [-0.1825615402092786, -0.013632808285279267, 0.32693962652879544,
                  0.49650207787389716],
         'out': [3.9695740701890205],
         'shapes': [[2, 6, 6, 4]]},
    ),
    'conv2d_same': (
        "Conv2d(3, 2, 4, padding='same', padding_mode='reflect')",
        [(1, 3, 6, 5)],
        {'buffers': {},
         'grads': {'bias': -1.7880873781338043,
                   'input': 87.77486550452348,
                   'weight': 0.4860657461304526},
         'head': [0.9213693257463766, 0.5325675215772641, -0.28630414650324165,
                  -0.6566755019424015],
         'out': [4.288080396522144],
         'shapes': [[1, 2, 6, 5]]},
    ),
    'conv1d': (
        'Conv1d(3, 4, 3, stride=2, padding=1, dilation=2)',
        [(2, 3, 11)],
        {'buffers': {},
         'grads': {'bias': 4.067761683807504,
                   'input': -2.036688208085607,
                   'weight': 1.7840894386611041},
         'head': [0.12341014713998101, 0.11628838552199108, 0.0466075232119702,
                  0.027778906718408297],
         'out': [2.427505100844562],
         'shapes': [[2, 4, 5]]},
    ),
    'conv_transpose2d': (
        'ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2)',
        [(2, 4, 3, 4)],
        {'buffers': {},
         'grads': {'bias': 5.471057822959013,
                   'input': 9.216179973544502,
                   'weight': 73.95653966848731},
         'head': [0.27434009265146064, 0.4961433799365359, 0.37857882750893146, 0.677356096687863],
         'out': [24.837828944977836],
         'shapes': [[2, 2, 6, 8]]},
    ),
    'maxpool2d': (
        'MaxPool2d(3, 2, 1, ceil_mode=True)',
        [(2, 3, 7, 6)],
        {'buffers': {},
         'grads': {'input': 1.0085056637942476},
         'head': [0.7322314440302514, 0.9356160015533859, 0.9999576464987401, 0.9289597150038692],
         'out': [10.025998622887293],
         'shapes': [[2, 3, 4, 4]]},
    ),
    'maxpool1d': (
        'MaxPool1d(2)',
        [(2, 3, 9)],
        {'buffers': {},
         'grads': {'input': -1.7455068302146608},
         'head': [0.4528862853790683, 0.9356160015533859, 0.9999576464987401, 0.7322314440302514],
         'out': [1.7700143372729484],
         'shapes': [[2, 3, 4]]},
    ),
    'avgpool2d': (
        'AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False)',
        [(2, 3, 7, 6)],
        {'buffers': {},
         'grads': {'input': 0.04072745764645069},
         'head': [0.43033755705406856, 0.3944368213812078, 0.18529529756863541,
                  0.036240870419434024],
         'out': [0.8266029763375657],
         'shapes': [[2, 3, 4, 4]]},
    ),
    'adaptive_avgpool2d': (
        'AdaptiveAvgPool2d((4, 3))',
        [(2, 3, 7, 6)],
        {'buffers': {},
         'grads': {'input': 0.4317426846591928},
         'head': [0.43033755705406856, 0.369333890187013, 0.11514537409872225, 0.06850669693363819],
         'out': [-0.389363408316448],
         'shapes': [[2, 3, 4, 3]]},
    ),
    'batchnorm2d': (
        'BatchNorm2d(3, momentum=0.2)',
        [(4, 3, 3, 2)],
        {'buffers': {'num_batches_tracked': 2.0,
                     'running_mean': 0.4190782549380616,
                     'running_var': 0.6478231563280507},
         'eval_out': 1.9042263440139071,
         'grads': {'bias': 4.947033266965944,
                   'input': 20.268120749010933,
                   'weight': 1.2838773123781975},
         'head': [-0.19270869798649218, -0.007434146207777554, 0.14567356525615838,
                  0.2458920259194157],
         'out': [2.963886362135281],
         'shapes': [[4, 3, 3, 2]]},
    ),
    'batchnorm1d_cumulative': (
        'BatchNorm1d(3, momentum=None)',
        [(5, 3)],
        {'buffers': {'num_batches_tracked': 2.0,
                     'running_mean': 0.1700726728409739,
                     'running_var': 2.001259730922161},
         'eval_out': 1.7423576826880962,
         'grads': {'bias': 4.634460598481902,
                   'input': 0.2552152311467673,
                   'weight': -1.1189861747343905},
         'head': [0.14387268687590482, 0.3091496084572707, 0.48717863280069384, 0.3165387308613017],
         'out': [1.6864100709897347],
         'shapes': [[5, 3]]},
    ),
    'layernorm': (
        'LayerNorm((3, 4))',
        [(2, 3, 4)],
        {'buffers': {},
         'grads': {'bias': 13.678133255704982,
                   'input': 0.34273709240763417,
                   'weight': -1.6905951705181872},
         'head': [0.09462800450830951, 0.25165052455740894, 0.42937196497308955, 0.574678256650916],
         'out': [3.4292000310851227],
         'shapes': [[2, 3, 4]]},
    ),
    'groupnorm': (
        'GroupNorm(2, 4)',
        [(2, 4, 3)],
        {'buffers': {},
         'grads': {'bias': 8.330593957572166,
                   'input': 0.18166453779144867,
                   'weight': -0.0018322752243276064},
         'head': [-0.1216501531860435, 0.03618950147200873, 0.166625484562746, 0.3527569706362912],
         'out': [3.917360706105369],
         'shapes': [[2, 4, 3]]},
    ),
    'gelu_tanh': (
        "GELU(approximate='tanh')",
        [(3, 4)],
        {'buffers': {},
         'grads': {'input': 3.8316180770042694},
         'head': [0.05388622332248757, 0.30554346659867454, 0.5746155854011424, 0.7720007575991198],
         'out': [2.0297691843365673],
         'shapes': [[3, 4]]},
    ),
    'gelu': (
        'GELU()',
        [(3, 4)],
        {'buffers': {},
         'grads': {'input': 3.831864879372464},
         'head': [0.053886255788276265, 0.30555544146743313, 0.5746829843610317,
                  0.7721307031427227],
         'out': [2.030238206021849],
         'shapes': [[3, 4]]},
    ),
    'silu': (
        'SiLU()',
        [(3, 4)],
        {'buffers': {},
         'grads': {'input': 3.729285917758963},
         'head': [0.05240631866774146, 0.27686082371934095, 0.5048757373295413, 0.6719718187385048],
         'out': [1.5890333155062504],
         'shapes': [[3, 4]]},
    ),
    'elu': (
        'ELU(0.5)',
        [(3, 4)],
        {'buffers': {},
         'grads': {'input': 4.829711469778617},
         'head': [0.09983341664682815, 0.4528862853790683, 0.7446431199708593, 0.9356160015533859],
         'out': [2.5324118708837835],
         'shapes': [[3, 4]]},
    ),
    'selu': (
        'SELU()',
        [(3, 4)],
        {'buffers': {},
         'grads': {'input': 7.085484232595},
         'head': [0.1048950694418934, 0.4758480672075429, 0.7823972613808473, 0.9830526566177292],
         'out': [1.1337720285748083],
         'shapes': [[3, 4]]},
    ),
    'softplus': (
        'Softplus(beta=2.0, threshold=1.0)',
        [(3, 4)],
        {'buffers': {},
         'grads': {'input': 4.030969001109852},
         'head': [0.3989778483684999, 0.6226306510795937, 0.7446431199708593, 0.9356160015533859],
         'out': [4.092454951379167],
         'shapes': [[3, 4]]},
    ),
    'hardtanh': (
        'Hardtanh(-0.5, 0.7)',
        [(3, 4)],
        {'buffers': {},
         'grads': {'input': 2.7398862956322625},
         'head': [0.09983341664682815, 0.4528862853790683, 0.7, 0.7],
         'out': [1.4154497807283648],
         'shapes': [[3, 4]]},
    ),
    'leaky_relu': (
        'LeakyReLU(0.2)',
        [(3, 4)],
        {'buffers': {},
         'grads': {'input': 4.586378813706126},
         'head': [0.09983341664682815, 0.4528862853790683, 0.7446431199708593, 0.9356160015533859],
         'out': [2.8119654519632746],
         'shapes': [[3, 4]]},
    ),
    'rnn': (
        'RNN(3, 4, num_layers=2, bidirectional=True)',
        [(5, 2, 3)],
        {'buffers': {},
         'grads': {'bias_hh_l0': 1.7438835234207977,
                   'bias_hh_l0_reverse': 1.1345965585581945,
                   'bias_hh_l1': 3.898647475037974,
                   'bias_hh_l1_reverse': 1.8194398880928881,
                   'bias_ih_l0': 1.7438835234207977,
                   'bias_ih_l0_reverse': 1.1345965585581945,
                   'bias_ih_l1': 3.8986474750379743,
                   'bias_ih_l1_reverse': 1.8194398880928881,
                   'input': -1.8381361615264822,
                   'weight_hh_l0': 9.824074967242113,
                   'weight_hh_l0_reverse': 7.3750237099433065,
                   'weight_hh_l1': 10.172979867726243,
                   'weight_hh_l1_reverse': 2.2374093069148038,
                   'weight_ih_l0': -7.113860848010221,
                   'weight_ih_l0_reverse': -0.7128036480094354,
                   'weight_ih_l1': 11.97987905166461,
                   'weight_ih_l1_reverse': 7.547559916211425},
         'head': [0.8970669857062261, -0.38595623999477785, 0.6213921240240288, 0.8257198531748237],
         'out': [5.576619274845165, 9.350725062920592],
         'shapes': [[5, 2, 8], [4, 2, 4]]},
    ),
    'lstm': (
        'LSTM(3, 4, batch_first=True)',
        [(2, 5, 3)],
        {'buffers': {},
         'grads': {'bias_hh_l0': 10.712836483930484,
                   'bias_ih_l0': 10.712836483930484,
                   'input': 3.0171721236895044,
                   'weight_hh_l0': -3.1639119960972026,
                   'weight_ih_l0': 2.91493889234099},
         'head': [0.10435387777136457, 0.10970238037669089, 0.0849895093432961,
                  0.04083048896262099],
         'out': [0.8851823944839828, -0.09002583670601741, 0.056488989196832096],
         'shapes': [[2, 5, 4], [1, 2, 4], [1, 2, 4]]},
    ),
    'lstm2': (
        'LSTM(3, 4, num_layers=2)',
        [(5, 2, 3)],
        {'buffers': {},
         'grads': {'bias_hh_l0': 3.30969488917491,
                   'bias_hh_l1': 13.238386570599628,
                   'bias_ih_l0': 3.30969488917491,
                   'bias_ih_l1': 13.238386570599628,
                   'input': -0.3549081498858556,
                   'weight_hh_l0': -1.1164539426612587,
                   'weight_hh_l1': 1.0817892511236926,
                   'weight_ih_l0': 1.3498293596943989,
                   'weight_ih_l1': -4.078014668692052},
         'head': [0.038675073125074406, -0.02293945768460764, -0.05626629982705685,
                  -0.06555737652509963],
         'out': [-0.13039196546242043, -0.201543015908131, -0.7604939264176088],
         'shapes': [[5, 2, 4], [2, 2, 4], [2, 2, 4]]},
    ),
    'gru': (
        'GRU(3, 4, bidirectional=True)',
        [(5, 2, 3)],
        {'buffers': {},
         'grads': {'bias_hh_l0': 3.7940948392015814,
                   'bias_hh_l0_reverse': 5.197932247549899,
                   'bias_ih_l0': 5.771180275179969,
                   'bias_ih_l0_reverse': 8.095592952204376,
                   'input': 3.075795551233708,
                   'weight_hh_l0': -1.9993991821186423,
                   'weight_hh_l0_reverse': 0.23621627358962666,
                   'weight_ih_l0': -9.621533296616704,
                   'weight_ih_l0_reverse': -11.593717160474936},
         'head': [0.1197632027451987, 0.18420403332608073, 0.18724210033169517,
                  0.10685832901814646],
         'out': [3.221714628602456, 1.4725010917077035],
         'shapes': [[5, 2, 8], [2, 2, 4]]},
    ),
    'lstm_cell': (
        'LSTMCell(3, 4)',
        [(2, 3)],
        {'buffers': {},
         'grads': {'bias_hh': 3.3593808285543787,
                   'bias_ih': 3.3593808285543787,
                   'input': 1.0503175536819254,
                   'weight_hh': 0.0,
                   'weight_ih': -4.2169924567297254},
         'head': [0.10435387777136457, 0.10970238037669089, 0.08498950934329612,
                  0.04083048896262099],
         'out': [0.4339307487551209, 1.5274688491298358],
         'shapes': [[2, 4], [2, 4]]},
    ),
    'gru_cell': (
        'GRUCell(3, 4)',
        [(2, 3)],
        {'buffers': {},
         'grads': {'bias_hh': 0.6329773053118632,
                   'bias_ih': 1.064112106258441,
                   'input': 0.7799436548234597,
                   'weight_hh': 0.0,
                   'weight_ih': -3.21561807350913},
         'head': [0.11976320274519872, 0.18420403332608068, 0.1872421003316952,
                  0.10685832901814643],
         'out': [1.0575205238637326],
         'shapes': [[2, 4]]},
    ),
}


CASES.update({  # MultiheadAttention (output and head-averaged weights)
    'mha': ('MultiheadAttention(8, 2)', [(5, 2, 8), (6, 2, 8), (6, 2, 8)], {
        'shapes': [[5, 2, 8], [2, 5, 6]], 'out': [3.197070498509298, 0.09121463770243393],
        'head': [-0.4123952057397845, 0.2500317223456137, 0.7757709413320779,
                 -0.18885854232836474],
        'grads': {'in_proj_weight': 0.17169097931325614, 'in_proj_bias': 1.614237238125361,
                  'out_proj.weight': -4.99082201928189, 'out_proj.bias': 11.353006248064132,
                  'input': -0.15236833307880807}, 'buffers': {}}),
    'mha_kv_dims_batch_first': (
        'MultiheadAttention(6, 3, batch_first=True, kdim=4, vdim=5)',
        [(2, 5, 6), (2, 4, 4), (2, 4, 5)], {
            'shapes': [[2, 5, 6], [2, 5, 4]], 'out': [0.5410842846713055, 2.612890129463063],
            'head': [-0.15034924879711156, 0.14664448328200286, 0.5622124646069057,
                     0.32682465552611384],
            'grads': {'q_proj_weight': -0.6141074962436275, 'k_proj_weight': -0.6195276381483064,
                      'v_proj_weight': 2.1863666387012555, 'in_proj_bias': 0.6830467666865174,
                      'out_proj.weight': 1.9499151718903245, 'out_proj.bias': 0.58152058477561,
                      'input': -0.3155354990542081}, 'buffers': {}}),
})


def _flat(y):
    if isinstance(y, tuple):
        return [z for part in y for z in _flat(part)]
    return [] if y is None else [y]


def _run(ctor, shapes, dtype, reps):
    lg.manual_seed(0)
    m = eval("nn." + ctor)  # the constructor call as written for torch.nn
    m = m.double() if dtype == lg.float64 else m
    state = {k: lg.tensor(det(tuple(v.shape), 0.23 + 0.01 * i, 0.5, 0.3), dtype=v.dtype)
             if v.is_floating_point() else v for i, (k, v) in enumerate(m.state_dict().items())}
    m.load_state_dict(state)
    xs = [lg.tensor(det(s, 0.37, 0.1 + j), dtype=dtype, requires_grad=True)
          for j, s in enumerate(shapes)]
    for _ in range(reps):
        m.zero_grad()
        ys = _flat(m(*xs))
        sum((y * lg.tensor(det(tuple(y.shape), 0.11, 0.2), dtype=dtype)).sum()
            for y in ys).backward()
    return m, xs, ys


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_matches_pytorch(name):
    ctor, shapes, want = CASES[name]
    m, xs, ys = _run(ctor, shapes, lg.float64, 2 if "batchnorm" in name else 1)
    assert [list(y.shape) for y in ys] == want["shapes"]
    got = [float((y.detach().numpy() * det(tuple(y.shape), 0.11, 0.2)).sum()) for y in ys]
    np.testing.assert_allclose(got, want["out"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ys[0].detach().numpy().ravel()[:4], want["head"], rtol=1e-10,
                               atol=1e-12)
    grads = {k: float((p.grad.numpy() * det(tuple(p.shape), 0.13, 0.3)).sum())
             for k, p in m.named_parameters()}
    grads["input"] = float((xs[0].grad.numpy() * det(tuple(xs[0].shape), 0.13, 0.3)).sum())
    assert grads.keys() == want["grads"].keys()
    for k, v in want["grads"].items():
        np.testing.assert_allclose(grads[k], v, rtol=1e-9, atol=1e-11, err_msg=k)
    buffers = {k: float(v.numpy().astype(np.float64).sum()) for k, v in m.named_buffers()}
    assert buffers == pytest.approx(want["buffers"], rel=1e-10, abs=1e-12)
    if "eval_out" in want:
        m.eval()
        y = m(*xs)
        got = float((y.detach().numpy() * det(tuple(y.shape), 0.11, 0.2)).sum())
        np.testing.assert_allclose(got, want["eval_out"], rtol=1e-10)


@pytest.mark.parametrize("name", ["conv2d", "lstm", "gru", "batchnorm2d", "layernorm"])
def test_module_matches_pytorch_in_float32(name):
    """float32 to float32 rounding: the parameters are float32, the arithmetic too."""
    ctor, shapes, want = CASES[name]
    m, xs, ys = _run(ctor, shapes, lg.float32, 2 if "batchnorm" in name else 1)
    assert all(y.dtype == lg.float32 for y in ys)
    assert all(p.grad.dtype == lg.float32 for p in m.parameters())
    got = [float((y.detach().numpy() * det(tuple(y.shape), 0.11, 0.2)).sum()) for y in ys]
    np.testing.assert_allclose(got, want["out"], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(ys[0].detach().numpy().ravel()[:4], want["head"], rtol=1e-5,
                               atol=1e-6)


def test_multihead_attention_masks_match_pytorch():
    """key_padding_mask (bool), an additive float attn_mask, per-head weights; a bool causal
    mask with need_weights=False (torch 2.13.0 values)."""
    m = nn.MultiheadAttention(4, 2, batch_first=True).double()
    m.load_state_dict({k: lg.tensor(det(tuple(v.shape), 0.23 + 0.01 * i, 0.5, 0.3))
                       for i, (k, v) in enumerate(m.state_dict().items())})
    q, kv = lg.tensor(det((2, 3, 4), 0.37, 0.1)), lg.tensor(det((2, 5, 4), 0.37, 1.1))
    kpm = lg.tensor([[False, False, True, False, True], [False] * 5])
    with lg.no_grad():
        o, w = m(q, kv, kv, key_padding_mask=kpm, attn_mask=lg.tensor(det((3, 5), 0.5, 0.3)),
                 average_attn_weights=False)
    assert w.shape == (2, 2, 3, 5) and not w.numpy()[0, :, :, [2, 4]].any()
    np.testing.assert_allclose([float((o.numpy() * det(o.shape, 0.11, 0.2)).sum()),
                                float((w.numpy() * det(w.shape, 0.11, 0.2)).sum())],
                               [4.52349831621743, 0.29801103361253667], rtol=1e-10)
    causal = lg.tensor(np.triu(np.ones((3, 5), bool), 1))
    with lg.no_grad():
        o, w = m(q, kv, kv, need_weights=False, attn_mask=causal)
    assert w is None
    np.testing.assert_allclose(float((o.numpy() * det(o.shape, 0.11, 0.2)).sum()),
                               4.984740765358388, rtol=1e-10)
