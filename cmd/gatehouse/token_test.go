package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestTokenCreate_ConnectorIsAUserTokenMarkedAsSuch(t *testing.T) {
	t.Parallel()
	url := dbtest.MustURL(t)
	s := &server{env: map[string]string{"DATABASE_URL": url}}
	s.cli(t, "a long enough password\n", "user", "create", "--email", "ana@example.com")

	tok := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "user", "--name", "mail client", "--connector"))
	plain := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "user", "--name", "script"))
	if !strings.HasPrefix(tok, "gh_u_") || !strings.HasPrefix(plain, "gh_u_") {
		t.Fatalf("tokens %q %q", tok, plain)
	}
	// An agent's evidence is never upgraded: no agent connector.
	err := run(context.Background(), []string{"token", "create", "--email", "ana@example.com", "--name", "bot", "--connector"}, s.getenv, strings.NewReader(""), io.Discard, io.Discard)
	if _, usage := err.(usageError); !usage {
		t.Fatalf("an agent connector: %v", err)
	}

	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var got []string
	rows, _ := conn.Query(context.Background(), "SELECT name || ':' || kind || ':' || connector FROM api_tokens ORDER BY name")
	for rows.Next() {
		var s string
		rows.Scan(&s)
		got = append(got, s)
	}
	if strings.Join(got, ",") != "mail client:user:true,script:user:false" {
		t.Fatalf("tokens stored %v", got)
	}
	// The database refuses an agent connector too.
	if _, err := conn.Exec(context.Background(), "UPDATE api_tokens SET kind = 'agent' WHERE connector"); err == nil {
		t.Fatal("the database took an agent connector")
	}
}
