/* detect merge: the --json documents of the parts of one `detect --shard
 * K/N` run joined into the document (and COCO results) one run over all the
 * inputs would have written, after checking that no part is missing, given
 * twice, incomplete or of another input set, and no image is in two. */
#ifndef DETECT_MERGE_H
#define DETECT_MERGE_H

/* argv[0] is "merge". Returns the exit status: 0 merged, 1 merged but some
 * images had failed in their parts, 2 a usage error or a check failed
 * (nothing written). */
int merge_main(int argc, char **argv);

#endif
