"""The on-device runtime (onnxruntime + numpy, never torch): the model's ONNX sessions, the
streaming encoder, the engine with its pilots, and the offload clients. The firmware API built on
it is `from pasu import understand, Understander`."""
