package tickets_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gatehouse/internal/app/apptest"
	"gatehouse/internal/testenv"
)

// A title holding a bidirectional control, a zero-width or invisible
// format character or a C1 control is refused with 400 validation_failed
// naming it (U+XXXX), whether the JSON carries it raw or escaped; nothing
// is stored. Text of every script is accepted.
func TestTicketTitleCannotSpoof(t *testing.T) {
	refused := []rune{0x061C, 0x200E, 0x200F, 0x2060, 0xFEFF}
	for _, span := range [][2]rune{{0x202A, 0x202E}, {0x2066, 0x2069}, {0x200B, 0x200D}, {0x0080, 0x009F}} {
		for r := span[0]; r <= span[1]; r++ {
			refused = append(refused, r)
		}
	}
	testenv.Run(t, func(t *testing.T, b testenv.Backend) {
		e := apptest.Start(t, b)
		for _, r := range refused {
			name := fmt.Sprintf("U+%04X", r)
			raw, _ := json.Marshal(map[string]string{"title": "invoice " + string(r) + "fdp.exe"})
			escaped := fmt.Sprintf(`{"title":"invoice \u%04xfdp.exe"}`, r)
			for _, body := range []string{string(raw), escaped} {
				resp := e.Do(t, "POST", e.PublicURL+"/api/tickets", body, apptest.JSONBody...)
				var eb struct{ Error, Message string }
				resp.JSON(t, &eb)
				if resp.Status != http.StatusBadRequest || eb.Error != "validation_failed" || !strings.Contains(eb.Message, name) {
					t.Errorf("%s: %d %s", name, resp.Status, resp.Body)
				}
			}
		}
		if list := e.Do(t, "GET", e.PublicURL+"/api/tickets", ""); list.Status != 200 || strings.TrimSpace(string(list.Body)) != "[]" {
			t.Fatalf("refused titles were stored: %d %s", list.Status, list.Body)
		}
		for _, title := range []string{"Printer 🖨️ on 3F jams", "打印机卡纸", "Café — naïve résumé", "طابعة الطابق الثالث"} {
			if got := createTicket(t, e, title); got.Title != title {
				t.Errorf("stored %q, want %q", got.Title, title)
			}
		}
	})
}
