/* Copied from /work/shared/bench/nfs-read.c (used by workloads.sh in NFS mode: ANCHOR_NFS_URL). */
/* Whole-file reader over a user-space NFS client (libnfs), for workload w4
 * when the target is only reachable through NFS (no kernel NFS client).
 *
 *   nfs-read URL P LISTFILE [PREFIX]
 *
 * URL:      libnfs URL of the export, e.g.
 *           nfs://127.0.0.1/vfs?version=3&nfsport=2049&mountport=20048
 * P:        number of reader processes (each mounts once, then reads its share)
 * LISTFILE: one export-relative file name per line; reader i takes lines
 *           i, i+P, i+2P, ... and reads each file whole with 1 MiB reads
 *           (open, read to EOF, close), like `cat`.
 * PREFIX:   prepended to every name (e.g. /anchor-w4/)
 *
 * Build: cc -O2 -o nfs-read nfs-read.c -lnfs   (Debian: libnfs-dev)
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nfsc/libnfs.h>

#define CHUNK (1024 * 1024)

static int reader(const char *url, int idx, int p, const char *list, const char *prefix)
{
    struct nfs_context *nfs = nfs_init_context();
    if (!nfs) { fprintf(stderr, "nfs_init_context failed\n"); return 1; }
    struct nfs_url *u = nfs_parse_url_dir(nfs, url);
    if (!u) { fprintf(stderr, "bad url: %s\n", nfs_get_error(nfs)); return 1; }
    if (nfs_mount(nfs, u->server, u->path) != 0) {
        fprintf(stderr, "mount failed: %s\n", nfs_get_error(nfs));
        return 1;
    }
    FILE *f = fopen(list, "r");
    if (!f) { perror(list); return 1; }
    char *buf = malloc(CHUNK);
    char line[4096], path[8192];
    long n = 0, files = 0;
    uint64_t bytes = 0;
    while (fgets(line, sizeof line, f)) {
        if (n++ % p != idx) continue;
        line[strcspn(line, "\n")] = 0;
        if (!line[0]) continue;
        snprintf(path, sizeof path, "%s%s", prefix, line);
        struct nfsfh *fh;
        if (nfs_open(nfs, path, O_RDONLY, &fh) != 0) {
            fprintf(stderr, "open %s: %s\n", path, nfs_get_error(nfs));
            return 1;
        }
        for (;;) {
            int r = nfs_read(nfs, fh, CHUNK, buf);
            if (r < 0) { fprintf(stderr, "read %s: %s\n", path, nfs_get_error(nfs)); return 1; }
            if (r == 0) break;
            bytes += (uint64_t)r;
        }
        nfs_close(nfs, fh);
        files++;
    }
    fclose(f);
    nfs_umount(nfs);
    nfs_destroy_url(u);
    nfs_destroy_context(nfs);
    fprintf(stderr, "reader %d: %ld files %llu bytes\n", idx, files, (unsigned long long)bytes);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s URL P LISTFILE [PREFIX]\n", argv[0]);
        return 2;
    }
    int p = atoi(argv[2]);
    const char *prefix = argc > 4 ? argv[4] : "/";
    if (p < 1) p = 1;
    for (int i = 0; i < p; i++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) _exit(reader(argv[1], i, p, argv[3], prefix));
    }
    int rc = 0, st;
    while (wait(&st) > 0)
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    return rc;
}
