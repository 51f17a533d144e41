"""``language.detect_language`` of many conversations at once, its sample cut by Arrow.

A conversation's sample is its turn texts concatenated in turn order, cut at ``LANGUAGE_SAMPLE_CHARS`` code
points. When the turns of many conversations are one Arrow string array in turn order, each conversation's
concatenated texts are one run of the array's data buffer: a string array over the same buffer, whose offsets are
the conversations' bounds, holds them without a copy, and ``utf8_slice_codeunits`` cuts each to its sample in
C++. ``detect_language`` then reads each sample, one call per conversation: that function itself, so the
language is the reference's by construction. (Counting the scripts in numpy instead must decode up to four
bytes per sample character for every conversation at once, which costs more than these calls on short samples.)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builders.mnbvc import language


def conversation_texts(texts: pa.Array, turn_bounds: np.ndarray) -> pa.Array:
    """Each conversation's turn texts concatenated, as a string array over ``texts``' own data (no copy):
    conversation ``i`` is turns ``turn_bounds[i]:turn_bounds[i + 1]`` of ``texts`` (no null among them)."""
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset :]
    bounds = offsets[turn_bounds].astype(np.int32)
    return pa.StringArray.from_buffers(len(turn_bounds) - 1, pa.py_buffer(bounds), texts.buffers()[2])


def detect_languages(texts: pa.Array, turn_bounds: np.ndarray) -> np.ndarray:
    """The language (zh, ja, ko or en) of each conversation (``language.detect_language`` of its turn texts), as
    an object array: ``texts`` all turn texts in turn order, conversation ``i`` turns
    ``turn_bounds[i]:turn_bounds[i + 1]``."""
    samples = pc.utf8_slice_codeunits(
        conversation_texts(texts, turn_bounds), 0, language.LANGUAGE_SAMPLE_CHARS
    )
    found = np.empty(len(samples), dtype=object)
    found[:] = [language.detect_language((sample,)) for sample in samples.to_pylist()]
    return found
