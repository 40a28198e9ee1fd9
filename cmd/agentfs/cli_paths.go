package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentfs/agentfs/client"
)

// Every verb that takes a file takes it as FILE: a file id (file_ and its
// 26 characters) or, anything else, the path of a live file, resolved
// through the listing by path (package client, IsFileID and FileAt).
// agentfs:PATH is a path, said explicitly: for a path spelled like an id.

// remotePrefix marks an argument as a remote path explicitly.
const remotePrefix = "agentfs:"

// remotePathArg is the remote path an argument names: agentfs:PATH is PATH.
func remotePathArg(arg string) string {
	return strings.TrimPrefix(arg, remotePrefix)
}

// fileID is the id of the file FILE names, asking the server only for a
// path.
func (cli *cliRun) fileID(ctx context.Context, arg string) (string, error) {
	if p, ok := strings.CutPrefix(arg, remotePrefix); ok {
		f, err := cli.client.FileAt(ctx, p)
		if err != nil {
			return "", noFile(err, arg)
		}
		return f.ID, nil
	}
	id, err := cli.client.FileID(ctx, arg)
	return id, noFile(err, arg)
}

// oneFile is the id of the one FILE of verb's arguments, found by resolve;
// anything but one argument, or flags that are not valid, is a usage error.
func (cli *cliRun) oneFile(ctx context.Context, verb string, args []string, valid bool,
	resolve func(context.Context, string) (string, error)) (string, error) {
	if len(args) != 1 || !valid {
		return "", usagef("%s needs one FILE (a file id or a path)", verb)
	}
	return resolve(ctx, args[0])
}

// resolve is the file FILE names: by id (a deleted one too), or the live
// file at a path.
func (cli *cliRun) resolve(ctx context.Context, arg string) (*client.File, error) {
	var (
		f   *client.File
		err error
	)
	if p, ok := strings.CutPrefix(arg, remotePrefix); ok {
		f, err = cli.client.FileAt(ctx, p)
	} else {
		f, err = cli.client.ResolveFile(ctx, arg)
	}
	return f, noFile(err, arg)
}

// deletedFileID is the id of the file FILE names for restore: an id, or
// the file deleted last among those that held a path.
func (cli *cliRun) deletedFileID(ctx context.Context, arg string) (string, error) {
	p, explicit := strings.CutPrefix(arg, remotePrefix)
	if !explicit && client.IsFileID(arg) {
		return arg, nil
	}
	f, err := cli.client.DeletedFileAt(ctx, p)
	if err != nil {
		return "", noFile(err, arg)
	}
	return f.ID, nil
}

// noFile adds to a path that names no file how to find what the user
// meant.
func noFile(err error, arg string) error {
	var nf *client.NoFileError
	if !errors.As(err, &nf) {
		return err
	}
	next := fmt.Sprintf("agentfs ls --path %s --deleted lists the files that held it", shellQuote(nf.Path))
	if nf.Deleted {
		next = fmt.Sprintf("agentfs ls --path %s --deleted lists what is kept", shellQuote(nf.Path))
	}
	if strings.HasPrefix(arg, "file_") && !client.IsFileID(arg) {
		next += "; a file id is file_ and 26 characters"
	}
	return withNext(err, next)
}

// intoFolder is the remote path a local file goes to: remote itself, or
// under it with the local file's name when remote is a folder (ends with
// '/', or is empty: the top).
func intoFolder(remote, local string) (string, error) {
	if remote != "" && !strings.HasSuffix(remote, "/") {
		return remote, nil
	}
	if local == "-" {
		return "", usagef("%q is a folder: name the file that stdin becomes", remote)
	}
	return remote + filepath.Base(local), nil
}

// notADirectory refuses a directory where a verb uploads one file.
func notADirectory(verb, local string) error {
	if local == "-" {
		return nil
	}
	if fi, err := os.Stat(local); err == nil && fi.IsDir() {
		return usagef("%s: %s is a directory: use agentfs cp -r %s REMOTE_FOLDER/ to upload a tree", verb, local, shellQuote(localForm(local)))
	}
	return nil
}
