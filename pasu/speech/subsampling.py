"""The encoder's convolution subsampling (two 3-wide stride-2 convolutions): how many encoder
frames a number of feature frames gives. Shared by the streaming runtime and training."""

SUBSAMPLING = 4
SUBSAMPLING_CONTEXT = 7  # input frames behind one output frame of two 3-wide stride-2 convs


def subsampled_length(num_frames: int) -> int:
    return max(((num_frames - 1) // 2 - 1) // 2, 0)
