"""What codedag knows about OpenCV (cv2) besides its backends: plain data, no imports."""

from codedag.backends.facts import CODEC, FILE_IO, FileSource, LibraryFacts, Requirement, ThreadPool

FACTS = LibraryFacts.one_module(
    "cv2",
    distributions=("opencv-python-headless", "opencv-python", "opencv-contrib-python"),
    non_migratable={
        **dict.fromkeys(
            ("cv2.imread", "cv2.imwrite", "cv2.imreadmulti", "cv2.VideoCapture"), FILE_IO
        ),
        **dict.fromkeys(("cv2.imdecode", "cv2.imencode"), CODEC),
    },
    file_sources={"cv2.imread": FileSource("filename"), "cv2.imdecode": FileSource("buf")},
    # its pthreads pool joins its threads when it shrinks (see codedag.migrate.worker_threads)
    thread_pool=ThreadPool(
        "setNumThreads", "getNumThreads", "OPENCV_FOR_THREADS_NUM", joins_on_shrink=True
    ),
    # OpenCV 5.1 rounds a scalar operand, warps and converts HLS unlike 5.0, which the backends
    # are verified equal to
    verified_below="5.1",
    requirement=Requirement(
        "opencv-python-headless", "cv2", "the cv2 pipelines codedag traces and migrates"
    ),
)
