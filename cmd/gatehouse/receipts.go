package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/receipts"
)

// chainBroken is a receipt chain that does not verify, or that no longer
// extends a checkpoint (exit status 3).
type chainBroken string

func (c chainBroken) Error() string { return string(c) }

// receiptsCommand is "receipts verify [--checkpoint FILE [--public-key
// FILE]]": verify every workspace's chain from seq 1, in this process (a
// page at a time, as the server's background verifications do), or, with
// a checkpoint an auditor saved, prove its workspace's chain still extends
// it, reading only the checkpoint's receipt and those after it. One JSON
// result per workspace on stdout.
func receiptsCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		return usageError("receipts needs verify")
	}
	var checkpointFile, publicKeyFile string
	cfg, err := loadConfig("receipts verify", args[1:], getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&checkpointFile, "checkpoint", "", "a checkpoint saved earlier (GET /api/v1/receipts/checkpoint): prove the chain still extends it, reading only from its seq on")
		fs.StringVar(&publicKeyFile, "public-key", "", "the key the checkpoint verifies with (PEM, base64, or GET /api/v1/receipts/public-key); default: the server's key file")
	})
	if err != nil {
		return err
	}
	if publicKeyFile != "" && checkpointFile == "" {
		return usageError("--public-key goes with --checkpoint")
	}
	var cp *receipts.SignedCheckpoint
	if checkpointFile != "" {
		if cp, err = readCheckpoint(checkpointFile, publicKeyFile, cfg.ReceiptKeyFile); err != nil {
			return err
		}
	}
	return withPool(ctx, cfg, stderr, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		svc := receipts.NewService(pool)
		var workspaces []uuid.UUID
		if cp != nil {
			workspaces = []uuid.UUID{uuid.MustParse(cp.WorkspaceID)}
		} else if workspaces, err = svc.Workspaces(ctx); err != nil {
			return err
		}
		var broken []receipts.Result
		for _, ws := range workspaces {
			var expect *receipts.Checkpoint
			if cp != nil {
				expect = &cp.Checkpoint
			}
			res, err := svc.VerifyWorkspace(ctx, ws, expect)
			if err != nil {
				return err
			}
			if err := json.NewEncoder(stdout).Encode(res); err != nil {
				return err
			}
			if !res.OK {
				broken = append(broken, res)
			}
		}
		if len(broken) > 0 {
			b := broken[0]
			return chainBroken(fmt.Sprintf("the receipt chain of workspace %s is broken at seq %d: %s", b.WorkspaceID, b.FirstBadSeq, b.Reason))
		}
		return nil
	})
}

// readCheckpoint reads a saved checkpoint and checks its signature, with
// the public key given or the one of the server's signing key.
func readCheckpoint(path, publicKeyFile, keyFile string) (*receipts.SignedCheckpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var cp receipts.SignedCheckpoint
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s: not the JSON of GET /api/v1/receipts/checkpoint: %w", path, err)
	}
	if err := cp.Valid(); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	var pub ed25519.PublicKey
	if publicKeyFile != "" {
		text, err := os.ReadFile(publicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		if pub, err = receipts.ParsePublicKey(text); err != nil {
			return nil, fmt.Errorf("public key %s: %w", publicKeyFile, err)
		}
	} else {
		key, err := receipts.ReadKey(keyFile)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageError(fmt.Sprintf("--checkpoint needs --public-key FILE: there is no signing key at %s (GATEHOUSE_RECEIPT_KEY_FILE)", keyFile))
		}
		if err != nil {
			return nil, err
		}
		pub = receipts.NewSigner(key).PublicKey()
	}
	if err := receipts.VerifyCheckpoint(pub, cp); err != nil {
		return nil, chainBroken(fmt.Sprintf("checkpoint %s: %v", path, err))
	}
	return &cp, nil
}
