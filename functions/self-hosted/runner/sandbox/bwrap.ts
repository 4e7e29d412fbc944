/**
 * The bubblewrap command line that confines one build step or app process.
 *
 * Layout inside (nothing else of the host exists there):
 *   /usr (read-only, with /bin /lib /lib64 /sbin as links into it), /etc holding
 *   only ssl/, ca-certificates/, resolv.conf, hosts, nsswitch.conf, localtime,
 *   the machine's global npmrc (as /etc/npmrc) and a passwd/group naming the
 *   sandbox user; the runner's Node toolchain read-only at /opt/node/bin; the
 *   deployment's source read-write at /app and its home at /home/app, with the
 *   project's build cache (build-cache.ts) read-write at /home/app/.cache; a
 *   private tmpfs /tmp; a /proc of its own pid namespace; a minimal /dev.
 *
 * How it is run: bwrap as root (the server), so the mounts are made with the
 * server's view of the file system (its DATA_DIR may be unreadable to others),
 * in new mount, pid, ipc and uts namespaces, with every capability dropped but
 * the two that `setpriv` needs to become the project's uid/gid; `setpriv` then
 * switches to that uid, clears the groups, the inheritable and bounding sets and
 * sets no-new-privileges before the command runs. Files the command writes
 * belong to the project's uid on the host too. `--die-with-parent`: when the
 * server dies, the sandbox dies with it; when the command exits, bwrap's init
 * exits and the kernel kills whatever else is left in the pid namespace.
 *
 * The network namespace is the host's: apps listen for the edge on loopback and
 * builds reach the package registry (see docs/runner.md, Sandbox).
 */

export interface BwrapLayout {
  bwrap: string;
  setpriv: string;
  uid: number;
  gid: number;
  /** Host directory mounted read-write at /app (the deployment's source). */
  src: string;
  /** Host directory mounted read-write at /home/app. */
  home: string;
  /** The project's build cache, mounted read-write at /home/app/.cache (home/.cache must exist); undefined: none. */
  cache?: string;
  /** Host files (server-owned, read-only inside) for /etc/passwd and /etc/group. */
  passwd: string;
  group: string;
  /** Directory of the Node binary the runner provides, mounted at /opt/node/bin. */
  toolchain: string;
  /** The machine's global npmrc (CA file, registry), mounted at /etc/npmrc; undefined: none. */
  npmrc?: string;
  /** Size cap of the private /tmp (it is memory, charged to the memory limit too). */
  tmpBytes: number;
}

/** Where the source and home are inside. */
export const SANDBOX_APP = "/app";
export const SANDBOX_HOME = "/home/app";
export const SANDBOX_CACHE = `${SANDBOX_HOME}/.cache`;
export const SANDBOX_TOOLCHAIN = "/opt/node/bin";
export const SANDBOX_NPMRC = "/etc/npmrc";
export const SANDBOX_PATH = `${SANDBOX_TOOLCHAIN}:/usr/local/bin:/usr/bin:/bin`;

/** Host files made visible read-only under /etc when they exist (what TLS, DNS and name lookups need). */
const ETC_FILES = ["/etc/ssl", "/etc/ca-certificates", "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/localtime", "/etc/mime.types"];

/** argv (starting with bwrap) running `/bin/sh -c command` in `cwd` (a sandbox path) confined by `layout`. */
export function bwrapArgv(layout: BwrapLayout, cwd: string, command: string): string[] {
  const dir = (path: string) => ["--perms", "0755", "--dir", path];
  return [
    layout.bwrap,
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--hostname",
    "sandbox",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--cap-add",
    "CAP_SETUID",
    "--cap-add",
    "CAP_SETGID",
    "--cap-add",
    "CAP_SETPCAP",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/sbin",
    "/sbin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--symlink",
    "usr/lib64",
    "/lib64",
    // bwrap makes missing parents 0700 root: the dropped uid could not pass them.
    ...dir("/etc"),
    ...ETC_FILES.flatMap((path) => ["--ro-bind-try", path, path]),
    "--ro-bind",
    layout.passwd,
    "/etc/passwd",
    "--ro-bind",
    layout.group,
    "/etc/group",
    ...(layout.npmrc ? ["--ro-bind", layout.npmrc, SANDBOX_NPMRC] : []),
    ...dir("/opt"),
    ...dir("/opt/node"),
    "--ro-bind",
    layout.toolchain,
    SANDBOX_TOOLCHAIN,
    "--bind",
    layout.src,
    SANDBOX_APP,
    ...dir("/home"),
    "--bind",
    layout.home,
    SANDBOX_HOME,
    ...(layout.cache ? ["--bind", layout.cache, SANDBOX_CACHE] : []),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--size",
    String(layout.tmpBytes),
    "--perms",
    "1777",
    "--tmpfs",
    "/tmp",
    // bwrap itself keeps no capability to enter the uid's 0700 directories: the command changes there once it is that uid.
    "--chdir",
    "/",
    "--",
    layout.setpriv,
    `--reuid=${layout.uid}`,
    `--regid=${layout.gid}`,
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
    "--no-new-privs",
    "--",
    "/bin/sh",
    "-c",
    'cd "$1" || exit 126; exec /bin/sh -c "$2"',
    "wsp-step",
    cwd,
    command,
  ];
}
