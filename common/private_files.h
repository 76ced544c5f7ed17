// Files and directories only their owner may use: the server's data dir,
// key files, the allow-list. Every check is made on the opened file (fstat
// of the descriptor read), so a file swapped between check and read is not
// trusted by mistake.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "common/status.h"

namespace npuprof {

// What EnsurePrivateDir did.
enum class PrivateDirOutcome { kCreated, kAlreadyPrivate, kTightened };

// A directory only this user can enter:
//  * missing: made with mode 0700 (missing parents as mkdir -p would);
//  * owned by another user, or not a directory: refused;
//  * writable by group or others: refused (others may already have planted
//    files in it: a socket, keys, an allow-list) — the message says how to
//    fix it;
//  * readable or searchable by group or others only (what older versions
//    made under umask 022): tightened to 0700 (nothing could be planted).
Result<PrivateDirOutcome> EnsurePrivateDir(const std::string& path);

// Reads a file holding a secret (a key pair): a regular file owned by this
// user with no permission bits for group or others (refused like ssh
// refuses an unprotected private key), at most cap bytes.
Result<std::string> ReadSecretFile(const std::string& path, size_t cap);
// Reads a file others must not be able to change (the allow-list): a
// regular file owned by this user or root, not writable by group or others,
// at most cap bytes. kNotFound when it does not exist.
Result<std::string> ReadProtectedFile(const std::string& path, size_t cap);

// Writes text to path atomically with mode: a new file (O_EXCL, not
// following symlinks) in the same directory, synced, then renamed over path.
Status WriteFileAtomically(const std::string& path, const std::string& text, mode_t mode);
// Like WriteFileAtomically, but only when path does not exist yet (a hard
// link instead of the rename): *created says whether this call made it.
// Two processes racing both end with the same file.
Status CreateFileAtomically(const std::string& path, const std::string& text, mode_t mode, bool* created);

}  // namespace npuprof
