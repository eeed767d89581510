# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The two-layer decoder on the CPU: checkpoint round trip, reference match, formats, runner."""

from __future__ import annotations

import json
import struct

import pytest

torch = pytest.importorskip('torch', reason='torch is not installed (the CI installs it)')

from reference_llama import llama_logits  # noqa: E402

from edge_loop.reasoning import checkpoint, quant  # noqa: E402
from edge_loop.reasoning.decoder import (  # noqa: E402
    LLAMA2_7B,
    TINY,
    DecoderConfig,
    DecodeRunner,
    kv_cache_nbytes,
    random_decoder,
    weights_nbytes,
)


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.fixture(scope='module')
def tiny_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp('tiny_llama')
    tensors = checkpoint.random_llama_tensors(TINY, seed=11)
    checkpoint.save_checkpoint(directory, TINY, tensors)
    return directory, tensors


def test_safetensors_round_trip_keeps_every_tensor_bit_exact(tmp_path):
    tensors = {'a': torch.randn(3, 5), 'b': torch.arange(7, dtype=torch.int64),
               'c': torch.randn(2, 2).half(), 'd': torch.randn(4).bfloat16(),
               'e': torch.zeros(0, 3)}
    checkpoint.write_safetensors(tmp_path / 'x.safetensors', tensors, {'format': 'pt'})
    raw = (tmp_path / 'x.safetensors').read_bytes()
    (n,) = struct.unpack('<Q', raw[:8])
    header = json.loads(raw[8:8 + n])
    assert header['__metadata__'] == {'format': 'pt'}
    assert header['c']['dtype'] == 'F16' and header['d']['dtype'] == 'BF16'
    back = checkpoint.read_safetensors(tmp_path / 'x.safetensors')
    assert set(back) == set(tensors)
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and back[name].shape == t.shape
        assert torch.equal(back[name], t)


def test_safetensors_reader_matches_the_library_when_installed(tmp_path):
    st = pytest.importorskip('safetensors.torch', reason='safetensors is not installed here')
    tensors = {'w': torch.randn(6, 4), 'i': torch.arange(5, dtype=torch.int32)}
    st.save_file(tensors, str(tmp_path / 'lib.safetensors'))
    back = checkpoint.read_safetensors(tmp_path / 'lib.safetensors')
    assert all(torch.equal(back[k], v) for k, v in tensors.items())


@pytest.mark.parametrize(('damage', 'message'), [
    (lambda raw: raw[:4], 'too short'),
    (lambda raw: struct.pack('<Q', 10**9) + raw[8:], 'header length'),
    (lambda raw: raw[:-8], 'offsets'),
])
def test_damaged_safetensors_file_is_refused_naming_it(tmp_path, damage, message):
    path = tmp_path / 'w.safetensors'
    checkpoint.write_safetensors(path, {'w': torch.randn(4, 4)})
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(checkpoint.CheckpointError, match=message):
        checkpoint.read_safetensors(path)


def test_checkpoint_directory_without_weights_or_config_is_refused(tmp_path):
    with pytest.raises(checkpoint.CheckpointError, match='config.json'):
        checkpoint.load_checkpoint(tmp_path)
    (tmp_path / 'config.json').write_text(TINY.to_json())
    with pytest.raises(checkpoint.CheckpointError, match='no \\*.safetensors'):
        checkpoint.load_checkpoint(tmp_path)


def test_config_reads_hugging_face_fields_and_ignores_others(tmp_path):
    (tmp_path / 'config.json').write_text(json.dumps({
        'architectures': ['LlamaForCausalLM'], 'hidden_size': 256, 'num_attention_heads': 8,
        'num_hidden_layers': 3, 'intermediate_size': 512, 'vocab_size': 1000,
        'rope_scaling': None}))
    cfg = DecoderConfig.from_json(tmp_path / 'config.json')
    assert (cfg.hidden_size, cfg.num_key_value_heads, cfg.head_dim) == (256, 8, 32)


def test_loaded_decoder_matches_an_independent_float64_llama(tiny_checkpoint):
    directory, tensors = tiny_checkpoint
    dec = checkpoint.load_checkpoint(directory, context=64, dtype=torch.float32)
    assert dec.meaningful
    tokens = torch.tensor([1, 17, 200, 3, 99, 42, 7, 300])
    want = llama_logits(TINY, tensors, tokens)
    assert rel(dec.forward(tokens, torch.arange(8)), want) < 1e-5
    # one token at a time through the KV cache gives the same logits
    dec.reset()
    stepped = torch.cat([dec.forward(tokens[i:i + 1], torch.tensor([i])) for i in range(8)])
    assert rel(stepped, want) < 1e-5


@pytest.mark.parametrize(('fmt', 'tolerance'), [('int8', 0.03), ('int4', 0.35)])
def test_packed_formats_stay_near_the_dense_model(tiny_checkpoint, fmt, tolerance):
    directory, tensors = tiny_checkpoint
    tokens = torch.tensor([5, 6, 7, 8, 9])
    want = llama_logits(TINY, tensors, tokens)
    dec = checkpoint.load_checkpoint(directory, fmt=fmt, context=32, dtype=torch.float32)
    err = rel(dec.forward(tokens, torch.arange(5)), want)
    assert 0 < err < tolerance


@pytest.mark.parametrize('fmt', ['int8', 'int4'])
def test_quantised_layer_reconstructs_the_weight(fmt):
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(64, 256, generator=gen) * 0.02
    layer = quant.make_weight(w, fmt)
    assert rel(layer.dequantize(), w) < (0.01 if fmt == 'int8' else 0.15)
    x = torch.randn(2, 256, generator=gen)
    assert rel(layer.forward(x), x @ layer.dequantize().T) < 1e-5
    assert layer.nbytes == quant.weight_bytes(64, 256, fmt, scale_bytes=4)


def test_int4_packing_round_trips_every_code():
    codes = torch.arange(16, dtype=torch.uint8).repeat(3, 2)
    assert torch.equal(quant.unpack_int4(quant.pack_int4(codes)), codes)


def test_predicted_bytes_match_the_built_decoder():
    for fmt in quant.FORMATS:
        dec = random_decoder(TINY, fmt=fmt, context=40, dtype=torch.float16)
        assert dec.weights_nbytes() == weights_nbytes(TINY, fmt)
        assert dec.kv_nbytes() == kv_cache_nbytes(TINY, 40)
        assert not dec.meaningful
    # the 7B shapes: 6.74e9 parameters, 12.55 GiB in fp16
    assert round(LLAMA2_7B.parameter_count() / 1e9, 2) == 6.74
    assert weights_nbytes(LLAMA2_7B, 'fp16') == 13_476_831_232
    assert weights_nbytes(LLAMA2_7B, 'int4') < weights_nbytes(LLAMA2_7B, 'int8') < \
        weights_nbytes(LLAMA2_7B, 'fp16') / 1.9


def test_runner_greedy_decode_matches_argmax_of_full_forward(tiny_checkpoint):
    directory, _ = tiny_checkpoint
    dec = checkpoint.load_checkpoint(directory, context=32, dtype=torch.float32)
    runner = DecodeRunner(dec)
    runner.capture()          # no graph on the CPU: a no-op
    runner.start(token=5, position=0)
    produced = [5]
    for _ in range(6):
        runner.step()
        produced.append(int(runner.token))
    assert int(runner.position) == 6
    dec.reset()
    logits = dec.forward(torch.tensor(produced[:-1]), torch.arange(6))
    assert produced[1:] == logits.argmax(-1).tolist()


def test_context_longer_than_the_model_allows_is_refused():
    with pytest.raises(ValueError, match='max_position_embeddings'):
        random_decoder(TINY, context=TINY.max_position_embeddings + 1)


def test_choice_scores_each_index_as_the_full_forward_does(tiny_checkpoint):
    from edge_loop.reasoning.chooser import ByteTokenizer, choose_target, prompt_for

    directory, _ = tiny_checkpoint
    dec = checkpoint.load_checkpoint(directory, context=512, dtype=torch.float32)
    tok = ByteTokenizer(TINY.vocab_size)
    positions = [(0.01 * i, -0.02 * i, 0.03) for i in range(12)]   # index 10, 11: two bytes
    choice = choose_target(dec, tok, 'pick the red one', positions)
    assert 0 <= choice.index < 12 and len(choice.scores) == 12
    assert choice.scores[choice.index] == max(choice.scores)
    # real weights but the byte fallback, not the checkpoint's tokenizer: not meaningful
    assert dec.meaningful and not choice.meaningful
    prompt = [1] + tok.encode(prompt_for('pick the red one', positions))
    for index in (3, 11):
        seq = prompt + tok.encode(str(index))
        dec.reset()
        logp = dec.forward(torch.tensor(seq), torch.arange(len(seq))).log_softmax(-1)
        want = sum(float(logp[k - 1, seq[k]]) for k in range(len(prompt), len(seq)))
        assert choice.scores[index] == pytest.approx(want, abs=1e-4)
    assert choose_target(dec, tok, 'anything', []) is None


def test_choice_with_random_weights_is_never_meaningful():
    from edge_loop.reasoning.chooser import choose_target

    class CheckpointTokenizer:
        real = True

        def encode(self, text):
            return [5 + (b % 200) for b in text.encode()]

    dec = random_decoder(TINY, context=512, dtype=torch.float32)
    choice = choose_target(dec, CheckpointTokenizer(), 'pick', [(0.0, 0.0, 0.0), (1.0, 0, 0)])
    assert choice is not None and not choice.meaningful


def test_runner_in_layer_chunks_decodes_the_same_tokens(tiny_checkpoint):
    # The step split into chunks of layers (what the frame gate schedules) is the same
    # arithmetic: the same greedy tokens as the one-piece step, whether run through
    # step() or chunk by chunk through a gate.
    from edge_loop.reasoning.gate import FrameGate

    directory, _ = tiny_checkpoint
    produced = {}
    for chunks in (1, 2):
        dec = checkpoint.load_checkpoint(directory, context=32, dtype=torch.float32)
        runner = DecodeRunner(dec, chunks=chunks)
        runner.start(token=5, position=0)
        runner.capture()
        gate = FrameGate()
        tokens = [5]
        for i in range(6):
            runner.step() if i % 2 else runner.step_between_frames(gate)
            tokens.append(int(runner.token))
        assert int(runner.position) == 6
        produced[chunks] = tokens
        assert gate.stats.runs == 3 * chunks
    assert produced[1] == produced[2]
    with pytest.raises(ValueError, match='chunks must be 1..2'):
        DecodeRunner(dec, chunks=3)


def test_a_prompt_fed_in_gated_layer_chunks_decodes_as_one_forward(tiny_checkpoint):
    from edge_loop.reasoning.gate import FrameGate

    directory, _ = tiny_checkpoint
    prompt = torch.tensor([3, 9, 1, 7, 2])
    dec = checkpoint.load_checkpoint(directory, context=32, dtype=torch.float32)
    first = int(dec.forward(prompt, torch.arange(5), last_only=True)[-1].argmax())
    whole = DecodeRunner(dec)
    whole.start(first, 5)
    want = []
    for _ in range(4):
        whole.step()
        want.append(int(whole.token))
    dec.reset()
    runner = DecodeRunner(dec, chunks=2)
    runner.capture()
    gate = FrameGate()
    runner.prefill_between_frames(prompt, gate)
    assert (int(runner.token), int(runner.position)) == (first, 5)
    assert gate.stats.runs == 2      # one gated piece per layer chunk
    got = []
    for _ in range(4):
        runner.step_between_frames(gate)
        got.append(int(runner.token))
    assert got == want
    with pytest.raises(ValueError, match='does not fit'):
        runner.prefill_between_frames(torch.zeros(32, dtype=torch.long), gate)
    # in token blocks of 2 (3 blocks x 2 layer chunks): the same next token and decode
    dec.reset()
    blocked = DecodeRunner(dec, chunks=2)
    blocked.capture()
    gate = FrameGate()
    blocked.prefill_between_frames(prompt, gate, block_tokens=2)
    assert (int(blocked.token), int(blocked.position)) == (first, 5)
    assert gate.stats.runs == 6
    got = []
    for _ in range(4):
        blocked.step_between_frames(gate)
        got.append(int(blocked.token))
    assert got == want


def test_a_gated_choice_scores_as_the_one_piece_forward(tiny_checkpoint):
    from edge_loop.reasoning.chooser import ByteTokenizer, choose_target
    from edge_loop.reasoning.gate import FrameGate

    directory, _ = tiny_checkpoint
    dec = checkpoint.load_checkpoint(directory, context=256, dtype=torch.float32)
    tok = ByteTokenizer(dec.cfg.vocab_size)
    positions = [(0.1, 0.0, 0.02), (-0.05, 0.03, 0.02), (0.0, -0.1, 0.03)]
    plain = choose_target(dec, tok, 'pick the red one', positions)
    gate = FrameGate()
    gated = choose_target(dec, tok, 'pick the red one', positions, gate=gate, chunks=2)
    assert gated.index == plain.index
    assert gated.scores == pytest.approx(plain.scores, abs=1e-5)
    assert gate.stats.runs >= 2 and gate.stats.runs % 2 == 0   # two chunks per forward
