/* detect.h: Mask R-CNN instance segmentation (ResNet-FPN backbone, RPN, box
 * and mask heads) on the CPU or a CUDA GPU. The only header of the library;
 * link with `pkg-config --cflags --libs detect`.
 *
 *   detect_model *m;
 *   if (detect_model_open(&m, "configs/mask_rcnn_R-101-FPN_torchvision.json",
 *                         "r101.safetensors", NULL) != DETECT_OK)
 *       fprintf(stderr, "%s\n", detect_last_error());
 *   detect_result *r;
 *   if (detect_run_file(m, "photo.jpg", &r) == DETECT_OK) {
 *       for (int i = 0; i < detect_result_count(r); i++) {
 *           detect_instance d;
 *           detect_result_instance(r, i, &d);
 *           printf("%s %.2f\n", detect_model_class_name(m, d.class_id), d.score);
 *       }
 *       detect_result_free(r);
 *   }
 *   detect_model_free(m);
 *
 * Rules that hold for every function:
 *  - Errors. Each call that can fail returns a detect_status; on failure
 *    detect_last_error() gives one line naming the file, option or tensor at
 *    fault (kept per thread until that thread's next failing call). The
 *    library never prints, never exits and never aborts on input.
 *  - Ownership. Every object is created by one call and freed by its
 *    *_free (which accepts NULL). Strings the library returns through a
 *    `char **` are the caller's, freed with detect_free(); `const char *`
 *    results belong to the object they came from and live as long as it.
 *  - Threads. Functions on different objects may run on any threads at
 *    once. A model runs as many images at once as it has execution
 *    contexts (detect_options_set_in_flight; 1 on the CPU by default):
 *    detect_run_* calls on one model from several threads each take a free
 *    context, and wait while all are busy. A detect_run_queue keeps them
 *    busy from one thread. Results are the same bytes whichever context
 *    ran them. Results and images are independent of their model once
 *    returned.
 *  - Signals. detect_model_open and detect_run_* hold asynchronous signals
 *    (SIGINT, SIGTERM, SIGCHLD, timers, SIGPROF; not faults or SIGABRT) on
 *    the calling thread, and on the OpenMP workers they use, until they
 *    return: a handler run inside the CPU's JIT kernels corrupts the heap.
 *    A Ctrl-C handler therefore runs after the current image, and a
 *    signal-sampling profiler charges the engine's time to the return.
 *  - Versions. DETECT_VERSION_* is the release (semantic versioning);
 *    DETECT_ABI_VERSION is the shared library's soname number
 *    (libdetect.so.DETECT_ABI_VERSION) and changes only when a program
 *    built against this header could break: a function or field removed or
 *    changed, an enum value renumbered. New functions and new enum values
 *    at the end keep the ABI. detect_version() says what is loaded. */
#ifndef DETECT_H
#define DETECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DETECT_VERSION_MAJOR 1
#define DETECT_VERSION_MINOR 0
#define DETECT_VERSION_PATCH 0
#define DETECT_VERSION_STRING "1.0.0"
#define DETECT_ABI_VERSION 1

#if defined(__GNUC__)
#define DETECT_API __attribute__((visibility("default")))
#else
#define DETECT_API
#endif

typedef enum {
    DETECT_OK = 0,
    DETECT_ERR_IO,          /* a file could not be opened, read or written */
    DETECT_ERR_FORMAT,      /* malformed contents: image, weights, JSON */
    DETECT_ERR_CONFIG,      /* a config key or an option is unknown, of the wrong type or out of range */
    DETECT_ERR_SHAPE,       /* a tensor or an image has the wrong shape or is missing */
    DETECT_ERR_RANGE,       /* a size or value outside what the engine allows */
    DETECT_ERR_OOM,         /* out of memory (host or GPU) */
    DETECT_ERR_UNSUPPORTED, /* valid, but not implemented by this build or device */
    DETECT_ERR_BACKEND,     /* oneDNN, CUDA, cuDNN or cuBLAS failed */
    DETECT_ERR_INTERNAL,    /* a bug in the library */
    DETECT_ERR_ARGUMENT     /* a NULL handle or pointer, or an index out of range */
} detect_status;

/* "DETECT_ERR_IO" etc.; "unknown" outside the enum. */
DETECT_API const char *detect_status_name(detect_status s);

/* The message of this thread's last failing call ("" before any). */
DETECT_API const char *detect_last_error(void);

/* The release of the loaded library, "1.0.0"; *abi (may be NULL) receives
 * its DETECT_ABI_VERSION. */
DETECT_API const char *detect_version(int *abi);

/* Frees a string the library returned through a `char **`. */
DETECT_API void detect_free(void *p);

/* ---- Opening a model --------------------------------------------------- */

typedef struct detect_options detect_options;

DETECT_API detect_status detect_options_create(detect_options **out);
DETECT_API void detect_options_free(detect_options *o);

/* "auto" (the default): the first GPU when this build has the CUDA backend
 * and one is usable, else the CPU (with a detect_model_notice() when a GPU
 * is there but fails to open). "cpu". "cuda" or "cuda:N": that GPU, or
 * detect_model_open fails with DETECT_ERR_UNSUPPORTED naming the cause (no
 * driver, no device, too old a GPU, no CUDA backend in this build): a GPU
 * asked for by name is never silently replaced by the CPU.
 * DETECT_ERR_CONFIG for any other text. */
DETECT_API detect_status detect_options_set_device(detect_options *o, const char *device);
/* GPU arithmetic: "fp32", "tf32" (TF32 tensor cores; the default where the
 * GPU has them), "fp16" (half-precision storage, fp32 accumulation). CPU
 * arithmetic: "fp32" (the default) or "bf16": the backbone's, FPN's and
 * RPN's convolutions read bf16 inputs and weights and sum in fp32, on a CPU
 * with AVX512_BF16 or AMX (elsewhere detect_model_open fails with
 * DETECT_ERR_UNSUPPORTED naming the CPU's instruction set); or "int8": the
 * same convolutions with u8 or s8 inputs, quantized by the activation
 * ranges that detect_calibration_save() keeps beside the weights
 * (`<weights without .safetensors>.int8.json`; without them, or with those
 * of other weights, detect_model_open fails with DETECT_ERR_CONFIG), s8
 * weights with a scale per output channel, s32 sums and fp32 outputs. The
 * config's reduced_precision section says which other parts follow.
 * "bf16" and "int8" make device "auto" the CPU, and are refused with
 * "cuda". tf32 or fp16 asked of the CPU computes fp32, with a notice. */
DETECT_API detect_status detect_options_set_precision(detect_options *o, const char *precision);
/* CPU threads for the model (OpenMP); 0, the default: every core. */
DETECT_API detect_status detect_options_set_threads(detect_options *o, int threads);
/* Overrides the config's box_head.score_thresh (0..1). */
DETECT_API detect_status detect_options_set_score_threshold(detect_options *o, double threshold);
/* Overrides the config's box_head.detections_per_image (>= 1). */
DETECT_API detect_status detect_options_set_max_detections(detect_options *o, int max_detections);
/* Keeps only these classes: comma-separated names of the config's
 * classes.class_names ("person,dog"); NULL or "" keeps all. An unknown name
 * fails detect_model_open with DETECT_ERR_CONFIG naming it. */
DETECT_API detect_status detect_options_set_classes(detect_options *o, const char *names);
/* GPU only: 0 keeps batchnorm as a separate AffineChannel pass instead of
 * folding it into the convolutions (a check; default 1). */
DETECT_API detect_status detect_options_set_fold_batchnorm(detect_options *o, int fold);
/* 1: after the per-class NMS, also drop a box that overlaps a higher-scored
 * box of any class (box_head.agnostic_nms on, at box_head.agnostic_nms_thresh);
 * 0: off; the default is the config's. */
DETECT_API detect_status detect_options_set_agnostic_nms(detect_options *o, int on);
/* Pads every image to one height x width canvas (multiples of the config's
 * input.size_divisibility) instead of its own size rounded up, as
 * torchvision pads a batch to its largest image: every image that fits
 * then runs on one CUDA graph, and its results are those of that padding
 * (an image that does not fit keeps its own). 0, 0: none; the default is
 * the config's input.canvas_h, canvas_w (configs/README.md). */
DETECT_API detect_status detect_options_set_canvas(detect_options *o, int height, int width);
/* Images run at once: the model opens this many execution contexts (1 to
 * 16), each with its own copy of the weights and activations and, on a GPU,
 * its own stream and CUDA graphs, so one image's host work overlaps the
 * others' GPU work. 0, the default: 1 on the CPU (whose threads already
 * share each image; more contexts split them), and on a GPU as many as its
 * free memory holds beside the first, keeping a tenth of it spare, at most
 * 4. A GPU without memory for the count asked for runs fewer, with a
 * detect_model_notice naming the memory that was asked for. */
DETECT_API detect_status detect_options_set_in_flight(detect_options *o, int images);

typedef struct detect_model detect_model;

/* Loads a config and safetensors weights (models/README.md) and plans every
 * buffer for the largest input the config allows. `config` is a path to a
 * JSON config, or the JSON text itself when its first non-blank character
 * is '{'. opts may be NULL (all defaults). On failure *out is NULL. */
DETECT_API detect_status detect_model_open(detect_model **out, const char *config, const char *weights_path,
                                           const detect_options *opts);
DETECT_API void detect_model_free(detect_model *m);

/* What the model runs on: "cpu" or "cuda:N". */
DETECT_API const char *detect_model_device(const detect_model *m);
/* What the model changed from what was asked, one line each ("precision fp16
 * applies to the GPU; ...", "device auto: <why the GPU failed>; running on
 * the CPU"), or "" when nothing was. */
DETECT_API const char *detect_model_notice(const detect_model *m);
/* The config's "name". */
DETECT_API const char *detect_model_name(const detect_model *m);
/* Classes including the background (index 0): COCO models have 81. */
DETECT_API int detect_model_num_classes(const detect_model *m);
/* The name of class id (0..num_classes-1), or NULL outside that range. */
DETECT_API const char *detect_model_class_name(const detect_model *m, int class_id);
/* The config's input.max_image_side: larger images are refused. */
DETECT_API int detect_model_max_image_side(const detect_model *m);
/* The images it runs at once: its execution contexts (detect_options_set_in_flight). */
DETECT_API int detect_model_in_flight(const detect_model *m);
/* What the model met so far: *sizes, the distinct network input sizes
 * (padded) of the images it ran; *warm_seconds, the host seconds its GPU
 * contexts spent warming up to them: each context runs a size's first
 * image op by op and captures its CUDA graph at the second, and replays it
 * from then on (0 on the CPU, which has nothing to warm); *graphs_failed
 * (may be NULL), the captures or instantiations of CUDA graphs that failed
 * (out of GPU memory, most likely): each such pass ran op by op, slower,
 * with the same results, and after 3 a size stays op by op on that
 * context. Waits for the images running. */
DETECT_API detect_status detect_model_sizes_seen(detect_model *m, int *sizes, double *warm_seconds,
                                                 int *graphs_failed);
/* The device memory execution context `context` (0 .. in_flight-1) took
 * when it opened, in bytes: weights, activations, workspaces and what
 * cuDNN and cuBLAS allocate for it, as the device's free memory fell; 0 on
 * the CPU or outside the range. */
DETECT_API size_t detect_model_device_memory(const detect_model *m, int context);

/* ---- Images ------------------------------------------------------------ */

/* A decoded image: 8-bit RGB, rows of 3 * width bytes, top row first. */
typedef struct detect_image detect_image;

/* Decodes a PNG, JPEG (RGB, grey, CMYK or YCCK), WebP, TIFF, GIF or BMP,
 * told apart by content, not name, into the RGB that Pillow's
 * Image.open(path).convert("RGB") gives (engine/io/image.h has the one
 * deliberate difference, 16-bit grey, and the TIFF layouts that go through
 * libtiff's own conversion); a JPEG's EXIF orientation is applied, as
 * Pillow's ImageOps.exif_transpose. A multi-page TIFF or an animated WebP
 * or GIF gives its first page or frame (detect_image_pages says how many a
 * TIFF or WebP holds). HEIC, AVIF, JPEG XL, JPEG 2000 and PSD files are
 * named as such (DETECT_ERR_UNSUPPORTED: "HEIC image: not supported;
 * convert it to JPEG or PNG"). Only a regular file is read: a FIFO, socket,
 * device or folder is refused at once (DETECT_ERR_IO, "not a regular
 * file"), never waited on. Images with a side longer than max_side are
 * refused before decoding (DETECT_ERR_RANGE); max_side <= 0 takes 20000.
 * Errors name the file. */
DETECT_API detect_status detect_image_load(const char *path, int max_side, detect_image **out);
/* The same from encoded bytes in memory; `name` labels errors (may be NULL). */
DETECT_API detect_status detect_image_decode(const void *data, size_t size, const char *name, int max_side,
                                             detect_image **out);

typedef enum {
    DETECT_PIXELS_RGB = 0, /* 3 bytes a pixel: red, green, blue */
    DETECT_PIXELS_BGR,     /* 3 bytes a pixel: blue, green, red (OpenCV) */
    DETECT_PIXELS_RGBA,    /* 4 bytes a pixel, alpha ignored */
    DETECT_PIXELS_BGRA,    /* 4 bytes a pixel, alpha ignored */
    DETECT_PIXELS_GRAY     /* 1 byte a pixel */
} detect_pixel_format;

/* A copy of caller pixels: height rows of width pixels, row r starting at
 * pixels + r * stride (stride >= width * bytes per pixel). */
DETECT_API detect_status detect_image_from_pixels(const uint8_t *pixels, int width, int height, size_t stride,
                                                  detect_pixel_format format, detect_image **out);
DETECT_API void detect_image_free(detect_image *img);
DETECT_API int detect_image_width(const detect_image *img);
DETECT_API int detect_image_height(const detect_image *img);
/* RGB bytes, height rows of 3 * width, owned by img. */
DETECT_API const uint8_t *detect_image_pixels(const detect_image *img);
/* Writes img as an 8-bit RGB PNG; a regular file appears complete or not
 * at all (written under a temporary name, synced, renamed). */
DETECT_API detect_status detect_image_write_png(const detect_image *img, const char *path);

/* Decoding ahead: `threads` workers decode paths[0..count) in order, at
 * most `depth` images ahead of the next one taken. Taking image i gives
 * exactly what detect_image_load(paths[i], max_side) would. paths[i] NULL
 * marks an entry to pass over (taking it gives DETECT_OK and *out NULL).
 * The paths must outlive the queue. */
typedef struct detect_image_queue detect_image_queue;
DETECT_API detect_status detect_image_queue_start(detect_image_queue **out, const char *const *paths, int count,
                                                  int threads, int depth, int max_side);
/* Waits for image `index` (increasing from call to call); *decode_seconds
 * (may be NULL) is the time its decode took on its worker. */
DETECT_API detect_status detect_image_queue_take(detect_image_queue *q, int index, detect_image **out,
                                                 double *decode_seconds);
DETECT_API void detect_image_queue_stop(detect_image_queue *q);

/* ---- Running the model ------------------------------------------------- */

typedef struct detect_result detect_result;

DETECT_API detect_status detect_run_image(detect_model *m, const detect_image *img, detect_result **out);
/* detect_image_from_pixels, then detect_run_image. */
DETECT_API detect_status detect_run_pixels(detect_model *m, const uint8_t *pixels, int width, int height,
                                           size_t stride, detect_pixel_format format, detect_result **out);
/* detect_image_decode (the model's max_image_side), then detect_run_image. */
DETECT_API detect_status detect_run_encoded(detect_model *m, const void *data, size_t size, detect_result **out);
/* detect_image_load, then detect_run_image; errors name the file. */
DETECT_API detect_status detect_run_file(detect_model *m, const char *path, detect_result **out);

/* ---- Several images in flight -----------------------------------------------
 * A run queue feeds the model's contexts from one thread: submit images,
 * collect their results in the order they were submitted. Its workers (one
 * per context) decode submitted files and run the images. Each result is
 * the one detect_run_image (or detect_run_file) gives for that image.
 *
 *   detect_run_queue *q;
 *   detect_run_queue_start(&q, m, 0);
 *   for (int i = 0; i < n; i++) {
 *       if (detect_run_queue_pending(q) == detect_run_queue_depth(q)) take_one(q);
 *       detect_run_queue_submit_file(q, paths[i], (void *)paths[i]);
 *   }
 *   while (detect_run_queue_pending(q) > 0) take_one(q);  // detect_run_queue_collect
 *   detect_run_queue_stop(q);
 *
 * One thread at a time may call a queue's functions. The model must
 * outlive the queue. Signals: the workers hold every asynchronous signal,
 * so Ctrl-C reaches the caller's threads; detect_run_queue_stop waits for
 * the images being run (at most one per context), drops the others. */
typedef struct detect_run_queue detect_run_queue;

/* depth: the most images submitted and not yet collected, 1 to 1024 (0:
 * twice the model's in-flight count). */
DETECT_API detect_status detect_run_queue_start(detect_run_queue **out, detect_model *m, int depth);
/* The queue's depth (after 0 was resolved), and the images submitted and
 * not yet collected. */
DETECT_API int detect_run_queue_depth(const detect_run_queue *q);
DETECT_API int detect_run_queue_pending(const detect_run_queue *q);
/* Submits img, which stays the caller's: it must not be changed or freed
 * until its result has been collected (or the queue stopped). `user`
 * comes back with the result. DETECT_ERR_RANGE, at once, when `depth`
 * images are pending: collect one first. */
DETECT_API detect_status detect_run_queue_submit(detect_run_queue *q, const detect_image *img, void *user);
/* Submits a file (path is copied): a worker decodes it at the model's
 * max_image_side, then runs it, as detect_run_file would; a file that
 * cannot be read or decoded fails at its collect, naming the file. */
DETECT_API detect_status detect_run_queue_submit_file(detect_run_queue *q, const char *path, void *user);
/* Waits for the oldest pending image: returns its run's status (on
 * failure detect_last_error() has its message, *out NULL), *out its result
 * (the caller's), *user (may be NULL) what it was submitted with. The
 * other images go on whatever one of them gave. DETECT_ERR_ARGUMENT when
 * none is pending. */
DETECT_API detect_status detect_run_queue_collect(detect_run_queue *q, detect_result **out, void **user);
DETECT_API void detect_run_queue_stop(detect_run_queue *q);

/* ---- int8 calibration ------------------------------------------------------
 * Measures the activation ranges that precision "int8" quantizes with. The
 * model must be open on the CPU in fp32 and outlive the calibration. Each
 * image added runs the model (its result is dropped) and records, for every
 * convolution, the `percentile` of |input| (the largest over the layer's
 * calls in that image, as the RPN's conv runs once per level); a layer's
 * range is the mean over the images, and it is signed when any of its
 * inputs was negative. The same images in the same order give the same
 * file at any thread count. */
typedef struct detect_calibration detect_calibration;

/* percentile in (0, 100]: 100 takes each image's largest |input|. Fails
 * with DETECT_ERR_UNSUPPORTED on a GPU, a reduced-precision model or one
 * running more than one image in flight. */
DETECT_API detect_status detect_calibration_create(detect_model *m, double percentile, detect_calibration **out);
DETECT_API detect_status detect_calibration_add(detect_calibration *c, const detect_image *img);
/* Writes the ranges (at least one image added) to path, or, with path
 * NULL, beside the model's weights where precision "int8" looks for them
 * (`<weights without .safetensors>.int8.json`); complete or not at all. */
DETECT_API detect_status detect_calibration_save(const detect_calibration *c, const char *path);
/* Stops recording (the model runs as before) and frees c; NULL is fine. */
DETECT_API void detect_calibration_free(detect_calibration *c);

/* ---- Results ----------------------------------------------------------- */

DETECT_API void detect_result_free(detect_result *r);
/* Instances, best score first (the config's order: per class, then by score). */
DETECT_API int detect_result_count(const detect_result *r);
/* The size of the image the result is for. */
DETECT_API int detect_result_width(const detect_result *r);
DETECT_API int detect_result_height(const detect_result *r);

typedef struct {
    int class_id;   /* 1..num_classes-1 (0, the background, is never reported) */
    float score;    /* 0..1 */
    float box[4];   /* x1, y1, x2, y2 in image pixels (x2, y2 exclusive edges, as the references) */
    /* The binary mask (bytes 0/1) over its window, the part of the image
     * the mask can cover: mask_h rows of mask_w bytes, image pixel (x, y)
     * at mask[(y - mask_y) * mask_w + (x - mask_x)]; every pixel outside
     * the window is 0. NULL when the model has no mask head. Owned by the
     * result. */
    const uint8_t *mask;
    int mask_x, mask_y, mask_w, mask_h;
} detect_instance;

DETECT_API detect_status detect_result_instance(const detect_result *r, int index, detect_instance *out);
/* Instance `index`'s mask over the whole image: out holds height * width
 * bytes (row-major), each 0 or 1. */
DETECT_API detect_status detect_result_mask(const detect_result *r, int index, uint8_t *out);
/* Instance `index`'s mask as COCO's compressed RLE string (pycocotools'
 * "counts" of a {"size": [height, width], "counts": ...} object). */
DETECT_API detect_status detect_result_mask_rle(const detect_result *r, int index, char **out);

typedef enum {
    DETECT_STAGE_PREPROCESS = 0,
    DETECT_STAGE_BACKBONE,
    DETECT_STAGE_FPN,
    DETECT_STAGE_RPN,
    DETECT_STAGE_BOX_HEAD,
    DETECT_STAGE_MASK_HEAD,
    DETECT_STAGE_MASK_PASTE,
    DETECT_STAGE_COUNT
} detect_stage;

/* Seconds the stage took for this result (0 for a stage outside the enum). */
DETECT_API double detect_result_stage_seconds(const detect_result *r, detect_stage stage);
/* "preprocess", "backbone", "fpn", "rpn", "box_head", "mask_head", "mask_paste". */
DETECT_API const char *detect_stage_name(detect_stage stage);

/* One image's entry of `detect --json`, as JSON text:
 *   {"file": file, "width": w, "height": h, "detections": [{"class_id",
 *    "class", "score", "box": [x1, y1, x2, y2], "mask": {"size": [h, w],
 *    "counts": "<RLE>"}}, ...]}
 * floats with 9 significant digits (exact float32). */
DETECT_API detect_status detect_result_json(const detect_model *m, const detect_result *r, const char *file,
                                            char **out);

/* A result rebuilt from one image's entry of `detect --json` (the text
 * detect_result_json gives, or an element of a document's "images", such as
 * the one in --output's NAME.json), so that a run can take over results
 * written by an earlier one: detect_result_json, detect_document_add and
 * the instances give what they gave for the original result (each mask is
 * held over the bounding box of its set pixels, so mask_x.. may differ).
 * The entry must come from a model with m's classes: a class_id outside
 * them, or a "class" name that differs, is DETECT_ERR_FORMAT naming the
 * file and the detection. Stage times are 0. */
DETECT_API detect_status detect_result_from_json(const detect_model *m, const char *json, detect_result **out);

/* A copy of img with the result drawn on it: masks at half opacity with
 * outlines, boxes, and "<class> <score>" labels; a colour per class. */
DETECT_API detect_status detect_render(const detect_model *m, const detect_image *img, const detect_result *r,
                                       detect_image **out);

/* ---- Documents over many images ---------------------------------------- */

typedef enum {
    /* {"images": [one detect_result_json entry per image]}; streamed to the file */
    DETECT_DOCUMENT_JSON = 0,
    /* COCO's results format (pycocotools loadRes): one array entry per
     * detection, {"image_id", "category_id", "bbox": [x, y, w, h], "score",
     * "segmentation": RLE}. Category ids: a model of 81 classes is taken to
     * be in COCO's order (1..80 -> COCO's 1..90 ids), any other model's are
     * its class ids. Held in memory, written at the close. */
    DETECT_DOCUMENT_COCO
} detect_document_kind;

/* A document written so that it appears complete or not at all: under a
 * temporary name until detect_document_close moves it into place (a device
 * or FIFO, such as /dev/stdout, is written in place). Opening fails at once
 * when the path cannot be written. */
typedef struct detect_document detect_document;

DETECT_API detect_status detect_document_open(detect_document **out, detect_document_kind kind, const char *path);
/* Adds one image's result. file: the image's path (its JSON "file"; for
 * COCO its image id: the file name's digits when it is all digits, as
 * COCO's "000000397133.jpg", else `index`). */
DETECT_API detect_status detect_document_add(detect_document *d, const detect_model *m, const char *file, int index,
                                             const detect_result *r);
/* JSON documents: adds a top-level member `"name": value` after the
 * "images" array, written at the close (detect --shard writes its "shard"
 * object so). name: letters, digits, '_', '-', '.', not "images"; value:
 * JSON text, checked (DETECT_ERR_FORMAT). A COCO document, an array, has
 * no members (DETECT_ERR_ARGUMENT). */
DETECT_API detect_status detect_document_add_member(detect_document *d, const char *name, const char *json_value);
/* Completes the file and frees d (also on failure). */
DETECT_API detect_status detect_document_close(detect_document *d);
/* Removes the temporary file and frees d; the path is left as it was. */
DETECT_API void detect_document_abort(detect_document *d);

/* Writes size bytes to path so that the file appears complete or not at all
 * (as documents are written). */
DETECT_API detect_status detect_write_file(const char *path, const void *data, size_t size);

/* The pages (TIFF) or frames (WebP) the file img was decoded from holds,
 * when more than one: only the first was decoded. 1 otherwise, and for
 * images made from bytes of a single-image format or from pixels. */
DETECT_API int detect_image_pages(const detect_image *img);

#ifdef __cplusplus
}
#endif

#endif
